#include "client/cpp/host_tensor.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cpp/status.h"
#include "common/half.h"

namespace tensord::client {
namespace {

using ::tensord::v1::BAD_TENSOR_DATA;
using ::tensord::v1::DTYPE_MISMATCH;
using ::tensord::v1::INVALID_REQUEST;

// A server newer than the table could send a dtype this client would refuse as unknown.
static_assert(::tensord::v1::DType_MAX == dtype_table::kCount,
              "common/dtype_table.h lacks a tensord.v1.DType");

template <typename T>
std::string PackBytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Element `i` of a bf16/f16 tensor's bytes, exactly.
float Load16(DType dtype, const std::string& bytes, size_t i) {
  uint16_t h;
  std::memcpy(&h, bytes.data() + 2 * i, 2);
  return dtype == DType::kBF16 ? BF16ToFloat(h) : HalfToFloat(h);
}

// The table entry of a dtype (null for a value outside the enum); DType values are wire numbers.
const dtype_table::Entry* TableEntry(DType dtype) {
  return dtype_table::At(dtype_table::IndexOfWireNumber(static_cast<int>(dtype)));
}

std::string PackBools(const std::vector<bool>& values) {
  std::string out(values.size(), '\0');
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i] ? 1 : 0;
  return out;
}

}  // namespace

std::string DTypeName(DType dtype) {
  if (const dtype_table::Entry* entry = TableEntry(dtype)) return std::string(entry->name);
  return absl::StrCat("dtype(", static_cast<int>(dtype), ")");
}

size_t DTypeSize(DType dtype) {
  const dtype_table::Entry* entry = TableEntry(dtype);
  return entry ? entry->size : 0;
}

absl::StatusOr<DType> DTypeFromProto(::tensord::v1::DType dtype) {
  if (dtype_table::IndexOfWireNumber(dtype) >= 0) return static_cast<DType>(dtype);
  return ClientError(DTYPE_MISMATCH,
                     absl::StrCat("client: unknown dtype ", static_cast<int>(dtype)),
                     {{"dtype", absl::StrCat(static_cast<int>(dtype))}});
}

std::string ShapeString(const Shape& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

int64_t NumElements(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

HostTensor::HostTensor(const std::vector<float>& v)
    : HostTensor(v, Shape{static_cast<int64_t>(v.size())}) {}
HostTensor::HostTensor(const std::vector<double>& v)
    : HostTensor(v, Shape{static_cast<int64_t>(v.size())}) {}
HostTensor::HostTensor(const std::vector<int32_t>& v)
    : HostTensor(v, Shape{static_cast<int64_t>(v.size())}) {}
HostTensor::HostTensor(const std::vector<int64_t>& v)
    : HostTensor(v, Shape{static_cast<int64_t>(v.size())}) {}
HostTensor::HostTensor(const std::vector<bool>& v)
    : HostTensor(v, Shape{static_cast<int64_t>(v.size())}) {}
HostTensor::HostTensor(const std::vector<uint8_t>& v)
    : HostTensor(v, Shape{static_cast<int64_t>(v.size())}) {}
HostTensor::HostTensor(const std::vector<int8_t>& v)
    : HostTensor(v, Shape{static_cast<int64_t>(v.size())}) {}
HostTensor::HostTensor(const std::vector<int16_t>& v)
    : HostTensor(v, Shape{static_cast<int64_t>(v.size())}) {}
HostTensor::HostTensor(const std::vector<float>& v, Shape shape)
    : HostTensor(DType::kF32, std::move(shape), PackBytes(v)) {}
HostTensor::HostTensor(const std::vector<double>& v, Shape shape)
    : HostTensor(DType::kF64, std::move(shape), PackBytes(v)) {}
HostTensor::HostTensor(const std::vector<int32_t>& v, Shape shape)
    : HostTensor(DType::kI32, std::move(shape), PackBytes(v)) {}
HostTensor::HostTensor(const std::vector<int64_t>& v, Shape shape)
    : HostTensor(DType::kI64, std::move(shape), PackBytes(v)) {}
HostTensor::HostTensor(const std::vector<bool>& v, Shape shape)
    : HostTensor(DType::kBool, std::move(shape), PackBools(v)) {}
HostTensor::HostTensor(const std::vector<uint8_t>& v, Shape shape)
    : HostTensor(DType::kU8, std::move(shape), PackBytes(v)) {}
HostTensor::HostTensor(const std::vector<int8_t>& v, Shape shape)
    : HostTensor(DType::kI8, std::move(shape), PackBytes(v)) {}
HostTensor::HostTensor(const std::vector<int16_t>& v, Shape shape)
    : HostTensor(DType::kI16, std::move(shape), PackBytes(v)) {}

HostTensor HostTensor::Zeros(DType dtype, Shape shape) {
  int64_t n = std::max<int64_t>(NumElements(shape), 0);
  return HostTensor(dtype, std::move(shape), std::string(n * DTypeSize(dtype), '\0'));
}

absl::StatusOr<HostTensor> HostTensor::FromFloats(const std::vector<float>& values, Shape shape,
                                                  DType dtype) {
  HostTensor out = Zeros(dtype, std::move(shape));
  if (static_cast<int64_t>(values.size()) != out.numel()) {
    return ClientError(
        BAD_TENSOR_DATA,
        absl::StrCat("client: ", values.size(), " values for shape ", ShapeString(out.shape_)),
        {{"shape", ShapeString(out.shape_)},
         {"dtype", DTypeName(dtype)},
         {"bytes", absl::StrCat(values.size() * DTypeSize(dtype))}});
  }
  char* p = out.bytes_.data();
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kF32:
        std::memcpy(p + 4 * i, &values[i], 4);
        break;
      case DType::kF64: {
        const double d = values[i];
        std::memcpy(p + 8 * i, &d, 8);
        break;
      }
      case DType::kBF16:
      case DType::kF16: {
        const uint16_t h = dtype == DType::kBF16 ? FloatToBF16(values[i]) : FloatToHalf(values[i]);
        std::memcpy(p + 2 * i, &h, 2);
        break;
      }
      default:
        return ClientError(
            DTYPE_MISMATCH,
            absl::StrCat("client: FromFloats needs a float dtype, not ", DTypeName(dtype)),
            {{"dtype", DTypeName(dtype)}});
    }
  }
  return out;
}

absl::StatusOr<std::vector<float>> HostTensor::ToFloats() const {
  if (dtype_ != DType::kF32 && dtype_ != DType::kBF16 && dtype_ != DType::kF16) {
    return ClientError(
        DTYPE_MISMATCH,
        absl::StrCat("client: tensor is ", DTypeName(dtype_), "; ToFloats reads f32, bf16 and f16"),
        {{"dtype", DTypeName(dtype_)}});
  }
  if (absl::Status s = Validate(); !s.ok()) return s;
  std::vector<float> out(static_cast<size_t>(numel()));
  if (dtype_ == DType::kF32) {
    if (!out.empty()) std::memcpy(out.data(), bytes_.data(), bytes_.size());
  } else {
    for (size_t i = 0; i < out.size(); ++i) out[i] = Load16(dtype_, bytes_, i);
  }
  return out;
}

absl::Status HostTensor::Validate() const {
  const int64_t n = NumElements(shape_);
  if (n < 0) {
    return ClientError(BAD_TENSOR_DATA,
                       absl::StrCat("client: shape ", ShapeString(shape_), " is invalid"),
                       {{"shape", ShapeString(shape_)}, {"dtype", DTypeName(dtype_)}});
  }
  const uint64_t expected = static_cast<uint64_t>(n) * DTypeSize(dtype_);
  if (bytes_.size() != expected) {
    // The metadata the server gives a literal whose bytes do not match.
    return ClientError(
        BAD_TENSOR_DATA,
        absl::StrCat("client: ", bytes_.size(), " bytes do not match shape ", ShapeString(shape_),
                     " of ", DTypeName(dtype_), " (", expected, " bytes)"),
        {{"shape", ShapeString(shape_)},
         {"dtype", DTypeName(dtype_)},
         {"bytes", absl::StrCat(bytes_.size())}});
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<std::vector<T>> HostTensor::ToVector() const {
  if (DTypeOf<T>::value != dtype_) {
    return ClientError(DTYPE_MISMATCH,
                       absl::StrCat("client: tensor is ", DTypeName(dtype_), ", not ",
                                    DTypeName(DTypeOf<T>::value)),
                       {{"dtype", DTypeName(dtype_)}});
  }
  if (absl::Status s = Validate(); !s.ok()) return s;
  std::vector<T> out(bytes_.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes_.data(), bytes_.size());
  return out;
}

template <>
absl::StatusOr<std::vector<bool>> HostTensor::ToVector<bool>() const {
  if (dtype_ != DType::kBool) {
    return ClientError(DTYPE_MISMATCH,
                       absl::StrCat("client: tensor is ", DTypeName(dtype_), ", not bool"),
                       {{"dtype", DTypeName(dtype_)}});
  }
  std::vector<bool> out(bytes_.size());
  for (size_t i = 0; i < bytes_.size(); ++i) out[i] = bytes_[i] != 0;
  return out;
}

template absl::StatusOr<std::vector<float>> HostTensor::ToVector<float>() const;
template absl::StatusOr<std::vector<double>> HostTensor::ToVector<double>() const;
template absl::StatusOr<std::vector<int32_t>> HostTensor::ToVector<int32_t>() const;
template absl::StatusOr<std::vector<int64_t>> HostTensor::ToVector<int64_t>() const;
template absl::StatusOr<std::vector<uint8_t>> HostTensor::ToVector<uint8_t>() const;
template absl::StatusOr<std::vector<int8_t>> HostTensor::ToVector<int8_t>() const;
template absl::StatusOr<std::vector<int16_t>> HostTensor::ToVector<int16_t>() const;

std::vector<double> HostTensor::ToDoubles() const {
  const size_t n = DTypeSize(dtype_) ? bytes_.size() / DTypeSize(dtype_) : 0;
  std::vector<double> out(n);
  auto load = [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, bytes_.data() + i * sizeof(T), sizeof(T));
      out[i] = static_cast<double>(v);
    }
  };
  switch (dtype_) {
    case DType::kF32:
      load(float{});
      break;
    case DType::kF64:
      load(double{});
      break;
    case DType::kI32:
      load(int32_t{});
      break;
    case DType::kI64:
      load(int64_t{});
      break;
    case DType::kBool:
      for (size_t i = 0; i < n; ++i) out[i] = bytes_[i] != 0 ? 1.0 : 0.0;
      break;
    case DType::kBF16:
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) out[i] = Load16(dtype_, bytes_, i);
      break;
    case DType::kU8:
      load(uint8_t{});
      break;
    case DType::kI8:
      load(int8_t{});
      break;
    case DType::kI16:
      load(int16_t{});
      break;
  }
  return out;
}

::tensord::v1::TensorData HostTensor::ToProto() const {
  ::tensord::v1::TensorData out;
  out.set_dtype(::tensord::client::ToProto(dtype_));
  for (int64_t d : shape_) out.add_shape(d);
  out.set_data(bytes_);
  return out;
}

absl::StatusOr<HostTensor> HostTensor::FromProto(const ::tensord::v1::TensorData& data) {
  return FromProto(::tensord::v1::TensorData(data));
}

absl::StatusOr<HostTensor> HostTensor::FromProto(::tensord::v1::TensorData&& data) {
  absl::StatusOr<DType> dtype = DTypeFromProto(data.dtype());
  if (!dtype.ok()) return dtype.status();
  HostTensor out(*dtype, Shape(data.shape().begin(), data.shape().end()),
                 std::move(*data.mutable_data()));
  if (absl::Status s = out.Validate(); !s.ok()) return s;
  return out;
}

}  // namespace tensord::client
