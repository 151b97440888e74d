// Element types. Storage is always row-major, contiguous and little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dtype_table.h"

namespace tensord {

// Positions in common/dtype_table.h, the table the C++ client shares: numbers match
// tensord.v1.DType minus one (the proto reserves 0 for "unspecified").
// kBF16 (bfloat16), kF16 (IEEE binary16), kU8, kI8 and kI16 are storage dtypes: kernels
// compute on the five compute dtypes, and the dispatcher runs an op on storage operands in
// their compute dtype (f32 for the 2-byte floats, i32 for the narrow integers) and stores its
// outputs back (see server/dispatch/storage_dtypes.cc), unless a kernel declares that it takes
// them directly (KernelTable's storage kernels: casts, copies, views).
enum class DType : uint8_t { kF32 = 0, kF64, kI32, kI64, kBool, kBF16, kF16, kU8, kI8, kI16 };
inline constexpr int kNumDTypes = dtype_table::kCount;
static_assert(static_cast<int>(DType::kI16) == kNumDTypes - 1, "DType follows dtype_table");

size_t DTypeSize(DType dtype);
// "f32", "f64", "i32", "i64", "bool", "bf16", "f16", "u8", "i8", "i16".
absl::string_view DTypeName(DType dtype);
// Accepts the short names and the PyTorch/numpy spellings ("float32", "int64", "bfloat16",
// "half", ...).
absl::StatusOr<DType> ParseDType(absl::string_view name);

inline bool IsLowPrecision(DType d) { return d == DType::kBF16 || d == DType::kF16; }
inline bool IsNarrowInt(DType d) { return d == DType::kU8 || d == DType::kI8 || d == DType::kI16; }
// A dtype kernels do not compute on: stored, and computed in ComputeDType.
inline bool IsStorageOnly(DType d) { return IsLowPrecision(d) || IsNarrowInt(d); }
inline bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF64 || IsLowPrecision(d); }
inline bool IsInt(DType d) { return d == DType::kI32 || d == DType::kI64 || IsNarrowInt(d); }
// The dtypes index operands take (index_select, gather, embedding, targets), as in PyTorch.
inline bool IsIndexInt(DType d) { return d == DType::kI32 || d == DType::kI64; }
inline bool IsBool(DType d) { return d == DType::kBool; }
// The dtype ops on `d` compute in: f32 for bf16/f16, i32 for u8/i8/i16, `d` itself otherwise.
inline DType ComputeDType(DType d) {
  return IsLowPrecision(d) ? DType::kF32 : IsNarrowInt(d) ? DType::kI32 : d;
}
// The range of values an integer dtype holds, as doubles (i64's upper end is 2^63, excluded).
struct IntRange {
  double lo, hi;
  bool Holds(double v) const { return v >= lo && (hi == 0x1p63 ? v < hi : v <= hi); }
};
IntRange RangeOf(DType int_dtype);
// Whether a number attribute may be stored in an integer tensor of `int_dtype` (fill values),
// as c10's overflow check has it: finite and in range, where an unsigned dtype also takes the
// negatives down to -max (they wrap: -1 fills u8 with 255).
bool FitsIn(DType int_dtype, double v);

// A set of dtypes as a bitmask, used by the op table ("F I B" in OPS.md).
class DTypeSet {
 public:
  constexpr DTypeSet() = default;
  constexpr explicit DTypeSet(uint32_t bits) : bits_(bits) {}
  static constexpr DTypeSet Of(DType d) { return DTypeSet(1u << static_cast<int>(d)); }
  constexpr DTypeSet operator|(DTypeSet o) const { return DTypeSet(bits_ | o.bits_); }
  constexpr bool Contains(DType d) const { return bits_ & (1u << static_cast<int>(d)); }
  constexpr bool empty() const { return bits_ == 0; }
  constexpr uint32_t bits() const { return bits_; }
  std::vector<DType> ToVector() const;
  std::string ToString() const;  // "f32,f64,i32"

 private:
  uint32_t bits_ = 0;
};

inline constexpr DTypeSet kFloat = DTypeSet(0b00011);
inline constexpr DTypeSet kInt = DTypeSet(0b01100);
inline constexpr DTypeSet kBoolOnly = DTypeSet(0b10000);
inline constexpr DTypeSet kFloatInt = DTypeSet(0b01111);
inline constexpr DTypeSet kAll = DTypeSet(0b11111);
inline constexpr DTypeSet kFloatBool = DTypeSet(0b10011);
inline constexpr DTypeSet kIntBool = DTypeSet(0b11100);
// The storage-only dtypes. Not part of kFloat/kAll: those name what kernels compute on.
inline constexpr DTypeSet kLowPrecision = DTypeSet(0b1100000);
inline constexpr DTypeSet kNarrowInt = DTypeSet(0b1110000000);
inline constexpr DTypeSet kStorageOnly = kLowPrecision | kNarrowInt;

// The dtypes an op accepts given the compute dtypes its table entry names: an op that takes
// f32 also takes bf16 and f16 operands (computed in f32, stored in 2 bytes), one that takes i32
// also u8, i8 and i16 (computed in i32). ListOps reports this set and the dispatcher checks
// against it.
constexpr DTypeSet WithStorageDTypes(DTypeSet compute) {
  DTypeSet out = compute;
  if (compute.Contains(DType::kF32)) out = out | kLowPrecision;
  if (compute.Contains(DType::kI32)) out = out | kNarrowInt;
  return out;
}

// PyTorch's type promotion for tensors of equal standing: bool < int < float, wider wins;
// bf16 and f16 rank below f32, and bf16 with f16 promotes to f32 (neither holds the other);
// u8 and i8 rank below i16, and u8 with i8 promotes to i16.
DType PromoteTypes(DType a, DType b);

// The DType of the C++ element type T (float, double, int32_t, int64_t, bool, uint8_t, int8_t,
// int16_t).
template <typename T>
struct DTypeOf {
  static constexpr DType value = static_cast<DType>(dtype_table::IndexOfType<T>());
};

}  // namespace tensord

// Runs the statement block with `T` bound to the C++ type of `dtype`. The block must be a
// lambda-like body using `T`; every branch is instantiated, so it must compile for all types.
#define TENSORD_DISPATCH_CASE(dtype_enum, ctype, ...) \
  case dtype_enum: {                                  \
    using T = ctype;                                  \
    __VA_ARGS__();                                    \
    break;                                            \
  }

#define TENSORD_DISPATCH_ALL(dtype, ...)                                \
  switch (dtype) {                                                      \
    TENSORD_DISPATCH_CASE(::tensord::DType::kF32, float, __VA_ARGS__)   \
    TENSORD_DISPATCH_CASE(::tensord::DType::kF64, double, __VA_ARGS__)  \
    TENSORD_DISPATCH_CASE(::tensord::DType::kI32, int32_t, __VA_ARGS__) \
    TENSORD_DISPATCH_CASE(::tensord::DType::kI64, int64_t, __VA_ARGS__) \
    TENSORD_DISPATCH_CASE(::tensord::DType::kBool, bool, __VA_ARGS__)   \
    default:                                                            \
      break;                                                            \
  }

// Every dtype with a C++ element type: the compute dtypes and the narrow integers (casts and
// conversions; other kernels see narrow integers widened to i32).
#define TENSORD_DISPATCH_TYPED(dtype, ...)                              \
  switch (dtype) {                                                      \
    TENSORD_DISPATCH_CASE(::tensord::DType::kF32, float, __VA_ARGS__)   \
    TENSORD_DISPATCH_CASE(::tensord::DType::kF64, double, __VA_ARGS__)  \
    TENSORD_DISPATCH_CASE(::tensord::DType::kI32, int32_t, __VA_ARGS__) \
    TENSORD_DISPATCH_CASE(::tensord::DType::kI64, int64_t, __VA_ARGS__) \
    TENSORD_DISPATCH_CASE(::tensord::DType::kBool, bool, __VA_ARGS__)   \
    TENSORD_DISPATCH_CASE(::tensord::DType::kU8, uint8_t, __VA_ARGS__)  \
    TENSORD_DISPATCH_CASE(::tensord::DType::kI8, int8_t, __VA_ARGS__)   \
    TENSORD_DISPATCH_CASE(::tensord::DType::kI16, int16_t, __VA_ARGS__) \
    default:                                                            \
      break;                                                            \
  }

// One element converted as PyTorch's casts convert: to bool as != 0, a float to a narrow
// integer through i64 (so -1.0 becomes 255 in u8, as in c10's static_cast_with_inter_type).
template <typename To, typename From>
To ConvertElement(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To> && sizeof(To) < 4) {
    return static_cast<To>(static_cast<int64_t>(v));
  } else {
    return static_cast<To>(v);
  }
}

#define TENSORD_DISPATCH_FLOAT(dtype, ...)                             \
  switch (dtype) {                                                     \
    TENSORD_DISPATCH_CASE(::tensord::DType::kF32, float, __VA_ARGS__)  \
    TENSORD_DISPATCH_CASE(::tensord::DType::kF64, double, __VA_ARGS__) \
    default:                                                           \
      break;                                                           \
  }

#define TENSORD_DISPATCH_NUMERIC(dtype, ...)                            \
  switch (dtype) {                                                      \
    TENSORD_DISPATCH_CASE(::tensord::DType::kF32, float, __VA_ARGS__)   \
    TENSORD_DISPATCH_CASE(::tensord::DType::kF64, double, __VA_ARGS__)  \
    TENSORD_DISPATCH_CASE(::tensord::DType::kI32, int32_t, __VA_ARGS__) \
    TENSORD_DISPATCH_CASE(::tensord::DType::kI64, int64_t, __VA_ARGS__) \
    default:                                                            \
      break;                                                            \
  }
