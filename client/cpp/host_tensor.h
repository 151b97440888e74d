// HostTensor: a tensor value in client memory (dtype, shape, row-major little-endian bytes),
// the unit of Put/Get and of inline literals, with .npy read/write.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/dtype_table.h"
#include "tensord/v1/tensor.pb.h"

namespace tensord::client {

// Numbers match tensord.v1.DType; order, names and sizes are those of common/dtype_table.h,
// which the server reads too. kBF16 and kF16 are 2-byte storage dtypes (the server computes on
// them in f32); C++ has no element type for them: HostTensor holds their 16-bit patterns,
// FromFloats rounds floats into them and ToFloats/ToDoubles read them. kU8, kI8 and kI16 are
// integer storage dtypes (uint8_t, int8_t, int16_t; the server computes on them in i32 and
// wraps the result into the narrow dtype).
enum class DType : int {
  kF32 = 1,
  kF64 = 2,
  kI32 = 3,
  kI64 = 4,
  kBool = 5,
  kBF16 = 6,
  kF16 = 7,
  kU8 = 8,
  kI8 = 9,
  kI16 = 10,
};
static_assert(static_cast<int>(DType::kI16) == dtype_table::WireNumber(dtype_table::kCount - 1),
              "DType follows common/dtype_table.h");
using Shape = std::vector<int64_t>;

// "f32", "f64", "i32", "i64", "bool", "bf16", "f16", "u8", "i8", "i16".
std::string DTypeName(DType dtype);
size_t DTypeSize(DType dtype);
absl::StatusOr<DType> DTypeFromProto(::tensord::v1::DType dtype);
inline ::tensord::v1::DType ToProto(DType dtype) {
  return static_cast<::tensord::v1::DType>(dtype);
}
std::string ShapeString(const Shape& shape);  // "[2, 3]"
// Product of the dims; -1 when a dim is negative or the product overflows.
int64_t NumElements(const Shape& shape);

// The dtype of each C++ element type (float, double, int32_t, int64_t, bool, uint8_t, int8_t,
// int16_t); bool travels as one byte, 0 or 1.
template <typename T>
struct DTypeOf {
  static constexpr DType value =
      static_cast<DType>(dtype_table::WireNumber(dtype_table::IndexOfType<T>()));
};

class HostTensor {
 public:
  // A 0-d f32 zero.
  HostTensor() : HostTensor(DType::kF32, {}, std::string(4, '\0')) {}
  // Raw bytes; Validate() says whether they fit dtype and shape.
  HostTensor(DType dtype, Shape shape, std::string bytes)
      : dtype_(dtype), shape_(std::move(shape)), bytes_(std::move(bytes)) {}

  // Typed constructors. Without a shape the tensor is 1-d of values.size() elements; with one,
  // Validate() reports a count that does not fit it.
  explicit HostTensor(const std::vector<float>& values);
  explicit HostTensor(const std::vector<double>& values);
  explicit HostTensor(const std::vector<int32_t>& values);
  explicit HostTensor(const std::vector<int64_t>& values);
  explicit HostTensor(const std::vector<bool>& values);
  explicit HostTensor(const std::vector<uint8_t>& values);
  explicit HostTensor(const std::vector<int8_t>& values);
  explicit HostTensor(const std::vector<int16_t>& values);
  HostTensor(const std::vector<float>& values, Shape shape);
  HostTensor(const std::vector<double>& values, Shape shape);
  HostTensor(const std::vector<int32_t>& values, Shape shape);
  HostTensor(const std::vector<int64_t>& values, Shape shape);
  HostTensor(const std::vector<bool>& values, Shape shape);
  HostTensor(const std::vector<uint8_t>& values, Shape shape);
  HostTensor(const std::vector<int8_t>& values, Shape shape);
  HostTensor(const std::vector<int16_t>& values, Shape shape);

  // 0-d tensors.
  static HostTensor Scalar(float v) { return HostTensor(std::vector<float>{v}, Shape{}); }
  static HostTensor Scalar(double v) { return HostTensor(std::vector<double>{v}, Shape{}); }
  static HostTensor Scalar(int32_t v) { return HostTensor(std::vector<int32_t>{v}, Shape{}); }
  static HostTensor Scalar(int64_t v) { return HostTensor(std::vector<int64_t>{v}, Shape{}); }
  static HostTensor Scalar(bool v) { return HostTensor(std::vector<bool>{v}, Shape{}); }
  static HostTensor Scalar(uint8_t v) { return HostTensor(std::vector<uint8_t>{v}, Shape{}); }
  static HostTensor Scalar(int8_t v) { return HostTensor(std::vector<int8_t>{v}, Shape{}); }
  static HostTensor Scalar(int16_t v) { return HostTensor(std::vector<int16_t>{v}, Shape{}); }
  // Zero-filled tensor of the given dtype and shape.
  static HostTensor Zeros(DType dtype, Shape shape);
  // Floats stored in a float dtype: f32, f64, or rounded to nearest even into bf16/f16 (the
  // server's own conversion). INVALID_ARGUMENT for a non-float dtype.
  static absl::StatusOr<HostTensor> FromFloats(const std::vector<float>& values, Shape shape,
                                               DType dtype);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const { return NumElements(shape_); }
  const std::string& bytes() const { return bytes_; }
  std::string& mutable_bytes() { return bytes_; }
  size_t nbytes() const { return bytes_.size(); }

  // OK when the byte count is numel * dtype size.
  absl::Status Validate() const;

  // Typed element access; the dtype must match T exactly.
  template <typename T>
  absl::StatusOr<std::vector<T>> ToVector() const;
  // Element-wise conversion of any dtype to double (bool → 0/1; bf16/f16 exactly).
  std::vector<double> ToDoubles() const;
  // The values of a bf16/f16/f32 tensor as floats (exact); DTYPE_MISMATCH for other dtypes.
  absl::StatusOr<std::vector<float>> ToFloats() const;
  // Pointer to the elements; null when T does not match the dtype.
  template <typename T>
  const T* data() const {
    return DTypeOf<T>::value == dtype_ ? reinterpret_cast<const T*>(bytes_.data()) : nullptr;
  }
  template <typename T>
  T* mutable_data() {
    return DTypeOf<T>::value == dtype_ ? reinterpret_cast<T*>(bytes_.data()) : nullptr;
  }

  // The inline wire form (Execute literals, fetched values).
  ::tensord::v1::TensorData ToProto() const;
  static absl::StatusOr<HostTensor> FromProto(const ::tensord::v1::TensorData& data);
  static absl::StatusOr<HostTensor> FromProto(::tensord::v1::TensorData&& data);

  // NumPy .npy: format versions 1.0 and 2.0 (3.0 read too), little-endian, C order,
  // dtypes f4 f8 i4 i8 b1 f2 u1 i1 i2. Writing picks 1.0 unless the header needs 2.0. NumPy has no
  // bfloat16: a bf16 tensor is written as '<u2' (its raw 16-bit patterns; in numpy,
  // `(a.astype(np.uint32) << 16).view(np.float32)` gives the values) and '<u2' is read back
  // as bf16, tensord having no other 16-bit unsigned dtype.
  static absl::StatusOr<HostTensor> ParseNpy(const std::string& npy);
  std::string ToNpy() const;
  static absl::StatusOr<HostTensor> ReadNpy(const std::string& path);
  absl::Status WriteNpy(const std::string& path) const;

  friend bool operator==(const HostTensor& a, const HostTensor& b) {
    return a.dtype_ == b.dtype_ && a.shape_ == b.shape_ && a.bytes_ == b.bytes_;
  }
  friend bool operator!=(const HostTensor& a, const HostTensor& b) { return !(a == b); }

 private:
  DType dtype_;
  Shape shape_;
  std::string bytes_;
};

template <>
absl::StatusOr<std::vector<bool>> HostTensor::ToVector<bool>() const;

}  // namespace tensord::client
