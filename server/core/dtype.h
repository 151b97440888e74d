// Element types. Storage is always row-major, contiguous and little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/dtype_table.h"

namespace tensord {

// Positions in common/dtype_table.h, the table the C++ client shares: numbers match
// tensord.v1.DType minus one (the proto reserves 0 for "unspecified").
// kBF16 (bfloat16) and kF16 (IEEE binary16) are storage dtypes: kernels compute on the five
// compute dtypes, and the dispatcher runs an op on bf16/f16 operands in f32 and rounds its
// float outputs back (see server/dispatch/low_precision.cc), unless a kernel declares that it
// takes them directly (KernelTable's low-precision kernels: casts, copies, views).
enum class DType : uint8_t { kF32 = 0, kF64, kI32, kI64, kBool, kBF16, kF16 };
inline constexpr int kNumDTypes = dtype_table::kCount;
static_assert(static_cast<int>(DType::kF16) == kNumDTypes - 1, "DType follows dtype_table");

size_t DTypeSize(DType dtype);
// "f32", "f64", "i32", "i64", "bool", "bf16", "f16".
absl::string_view DTypeName(DType dtype);
// Accepts the short names and the PyTorch/numpy spellings ("float32", "int64", "bfloat16",
// "half", ...).
absl::StatusOr<DType> ParseDType(absl::string_view name);

inline bool IsLowPrecision(DType d) { return d == DType::kBF16 || d == DType::kF16; }
inline bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF64 || IsLowPrecision(d); }
inline bool IsInt(DType d) { return d == DType::kI32 || d == DType::kI64; }
inline bool IsBool(DType d) { return d == DType::kBool; }

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

// The dtypes an op accepts given the compute dtypes its table entry names: an op that takes
// f32 also takes bf16 and f16 operands (computed in f32, stored in 2 bytes). ListOps reports
// this set and the dispatcher checks against it.
constexpr DTypeSet WithLowPrecision(DTypeSet compute) {
  return compute.Contains(DType::kF32) ? compute | kLowPrecision : compute;
}

// PyTorch's type promotion for tensors of equal standing: bool < int < float, wider wins;
// bf16 and f16 rank below f32, and bf16 with f16 promotes to f32 (neither holds the other).
DType PromoteTypes(DType a, DType b);

// The DType of the C++ element type T (float, double, int32_t, int64_t, bool).
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
