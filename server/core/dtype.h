// Element types. Storage is always row-major, contiguous and little-endian.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensord {

// Numbers match tensord.v1.DType minus one (the proto reserves 0 for "unspecified").
enum class DType : uint8_t { kF32 = 0, kF64, kI32, kI64, kBool };
inline constexpr int kNumDTypes = 5;

size_t DTypeSize(DType dtype);
// "f32", "f64", "i32", "i64", "bool".
absl::string_view DTypeName(DType dtype);
// Accepts the short names and the PyTorch/numpy spellings ("float32", "int64", ...).
absl::StatusOr<DType> ParseDType(absl::string_view name);

inline bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF64; }
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

// PyTorch's type promotion for tensors of equal standing: bool < int < float, wider wins.
DType PromoteTypes(DType a, DType b);

template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kF32;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kF64;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kI32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kI64;
};
template <>
struct DTypeOf<bool> {
  static constexpr DType value = DType::kBool;
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
