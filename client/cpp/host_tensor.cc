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

namespace tensord::client {
namespace {

using ::tensord::v1::BAD_TENSOR_DATA;
using ::tensord::v1::DTYPE_MISMATCH;
using ::tensord::v1::INVALID_REQUEST;

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;

absl::Status NpyError(const std::string& what) {
  return ClientError(absl::StatusCode::kInvalidArgument, BAD_TENSOR_DATA, "npy: " + what);
}

template <typename T>
std::string PackBytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::string PackBools(const std::vector<bool>& values) {
  std::string out(values.size(), '\0');
  for (size_t i = 0; i < values.size(); ++i) out[i] = values[i] ? 1 : 0;
  return out;
}

// The value of `key` in a Python dict literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }: the text up to the next top-level
// comma or closing brace.
absl::StatusOr<std::string> DictValue(const std::string& header, const std::string& key) {
  for (char quote : {'\'', '"'}) {
    std::string needle = absl::StrCat(std::string(1, quote), key, std::string(1, quote));
    size_t pos = header.find(needle);
    if (pos == std::string::npos) continue;
    pos = header.find(':', pos + needle.size());
    if (pos == std::string::npos) break;
    ++pos;
    int depth = 0;
    size_t end = pos;
    for (; end < header.size(); ++end) {
      char c = header[end];
      if (c == '(' || c == '[') ++depth;
      if (c == ')' || c == ']') --depth;
      if (depth == 0 && (c == ',' || c == '}')) break;
    }
    return std::string(absl::StripAsciiWhitespace(header.substr(pos, end - pos)));
  }
  return NpyError(absl::StrCat("header has no '", key, "' entry: ", header));
}

absl::StatusOr<DType> DTypeFromDescr(std::string descr) {
  if (descr.size() >= 2 && (descr.front() == '\'' || descr.front() == '"')) {
    descr = descr.substr(1, descr.size() - 2);
  }
  if (descr == "<f4") return DType::kF32;
  if (descr == "<f8") return DType::kF64;
  if (descr == "<i4") return DType::kI32;
  if (descr == "<i8") return DType::kI64;
  if (descr == "|b1" || descr == "<b1" || descr == "b1" || descr == "?") return DType::kBool;
  if (!descr.empty() && descr[0] == '>') {
    return NpyError(
        absl::StrCat("big-endian dtype '", descr,
                     "' is not supported; convert with arr.astype(arr.dtype.newbyteorder('<'))"));
  }
  return ClientError(
      absl::StatusCode::kInvalidArgument, DTYPE_MISMATCH,
      absl::StrCat("npy: dtype '", descr, "' is not supported (supported: <f4 <f8 <i4 <i8 |b1)"),
      {{"dtype", descr}});
}

std::string DescrOf(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "<f4";
    case DType::kF64:
      return "<f8";
    case DType::kI32:
      return "<i4";
    case DType::kI64:
      return "<i8";
    case DType::kBool:
      return "|b1";
  }
  return "?";
}

absl::StatusOr<Shape> ParseShapeTuple(std::string text) {
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') {
    return NpyError(absl::StrCat("shape '", text, "' is not a tuple"));
  }
  Shape shape;
  for (absl::string_view part : absl::StrSplit(text.substr(1, text.size() - 2), ',')) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    // Python 2 era writers append 'L' to longs.
    if (part.back() == 'L') part.remove_suffix(1);
    int64_t dim = 0;
    if (!absl::SimpleAtoi(part, &dim) || dim < 0) {
      return NpyError(absl::StrCat("shape '", text, "' has a bad dimension '", part, "'"));
    }
    shape.push_back(dim);
  }
  return shape;
}

// Fortran-order bytes → C order.
std::string FortranToC(const std::string& in, const Shape& shape, size_t item) {
  const int64_t n = NumElements(shape);
  std::string out(in.size(), '\0');
  std::vector<int64_t> f_strides(shape.size(), 1);
  for (size_t d = 1; d < shape.size(); ++d) f_strides[d] = f_strides[d - 1] * shape[d - 1];
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t c = 0; c < n; ++c) {
    int64_t f = 0;
    for (size_t d = 0; d < shape.size(); ++d) f += index[d] * f_strides[d];
    std::memcpy(&out[c * item], &in[f * item], item);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

}  // namespace

std::string DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "f32";
    case DType::kF64:
      return "f64";
    case DType::kI32:
      return "i32";
    case DType::kI64:
      return "i64";
    case DType::kBool:
      return "bool";
  }
  return absl::StrCat("dtype(", static_cast<int>(dtype), ")");
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
    case DType::kI32:
      return 4;
    case DType::kF64:
    case DType::kI64:
      return 8;
    case DType::kBool:
      return 1;
  }
  return 0;
}

absl::StatusOr<DType> DTypeFromProto(::tensord::v1::DType dtype) {
  if (dtype >= ::tensord::v1::DTYPE_F32 && dtype <= ::tensord::v1::DTYPE_BOOL) {
    return static_cast<DType>(dtype);
  }
  return ClientError(absl::StatusCode::kInvalidArgument, DTYPE_MISMATCH,
                     absl::StrCat("client: unknown dtype ", static_cast<int>(dtype)));
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

HostTensor HostTensor::Zeros(DType dtype, Shape shape) {
  int64_t n = std::max<int64_t>(NumElements(shape), 0);
  return HostTensor(dtype, std::move(shape), std::string(n * DTypeSize(dtype), '\0'));
}

absl::Status HostTensor::Validate() const {
  const int64_t n = NumElements(shape_);
  if (n < 0) {
    return ClientError(absl::StatusCode::kInvalidArgument, BAD_TENSOR_DATA,
                       absl::StrCat("client: shape ", ShapeString(shape_), " is invalid"));
  }
  const uint64_t expected = static_cast<uint64_t>(n) * DTypeSize(dtype_);
  if (bytes_.size() != expected) {
    return ClientError(
        absl::StatusCode::kInvalidArgument, BAD_TENSOR_DATA,
        absl::StrCat("client: ", bytes_.size(), " bytes do not match shape ", ShapeString(shape_),
                     " of ", DTypeName(dtype_), " (", expected, " bytes)"),
        {{"bytes", absl::StrCat(bytes_.size())}, {"expected_bytes", absl::StrCat(expected)}});
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<std::vector<T>> HostTensor::ToVector() const {
  if (DTypeOf<T>::value != dtype_) {
    return ClientError(absl::StatusCode::kInvalidArgument, DTYPE_MISMATCH,
                       absl::StrCat("client: tensor is ", DTypeName(dtype_), ", not ",
                                    DTypeName(DTypeOf<T>::value)));
  }
  if (absl::Status s = Validate(); !s.ok()) return s;
  std::vector<T> out(bytes_.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes_.data(), bytes_.size());
  return out;
}

template <>
absl::StatusOr<std::vector<bool>> HostTensor::ToVector<bool>() const {
  if (dtype_ != DType::kBool) {
    return ClientError(absl::StatusCode::kInvalidArgument, DTYPE_MISMATCH,
                       absl::StrCat("client: tensor is ", DTypeName(dtype_), ", not bool"));
  }
  std::vector<bool> out(bytes_.size());
  for (size_t i = 0; i < bytes_.size(); ++i) out[i] = bytes_[i] != 0;
  return out;
}

template absl::StatusOr<std::vector<float>> HostTensor::ToVector<float>() const;
template absl::StatusOr<std::vector<double>> HostTensor::ToVector<double>() const;
template absl::StatusOr<std::vector<int32_t>> HostTensor::ToVector<int32_t>() const;
template absl::StatusOr<std::vector<int64_t>> HostTensor::ToVector<int64_t>() const;

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

absl::StatusOr<HostTensor> HostTensor::ParseNpy(const std::string& npy) {
  if (npy.size() < kNpyMagicLen + 4 || npy.compare(0, kNpyMagicLen, kNpyMagic) != 0) {
    return NpyError("not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(npy[6]);
  size_t header_len = 0;
  size_t offset = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(npy[8]) | static_cast<unsigned char>(npy[9]) << 8;
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (npy.size() < 12) return NpyError("truncated header");
    for (int i = 3; i >= 0; --i)
      header_len = header_len << 8 | static_cast<unsigned char>(npy[8 + i]);
    offset = 12;
  } else {
    return NpyError(absl::StrCat("format version ", major, ".",
                                 static_cast<int>(static_cast<unsigned char>(npy[7])),
                                 " is not supported (1.0, 2.0, 3.0 are)"));
  }
  if (npy.size() < offset + header_len) return NpyError("truncated header");
  const std::string header = npy.substr(offset, header_len);
  offset += header_len;

  absl::StatusOr<std::string> descr = DictValue(header, "descr");
  if (!descr.ok()) return descr.status();
  absl::StatusOr<DType> dtype = DTypeFromDescr(*descr);
  if (!dtype.ok()) return dtype.status();
  absl::StatusOr<std::string> fortran = DictValue(header, "fortran_order");
  if (!fortran.ok()) return fortran.status();
  if (*fortran != "False" && *fortran != "True") {
    return NpyError(absl::StrCat("fortran_order '", *fortran, "' is not True or False"));
  }
  absl::StatusOr<std::string> shape_text = DictValue(header, "shape");
  if (!shape_text.ok()) return shape_text.status();
  absl::StatusOr<Shape> shape = ParseShapeTuple(*shape_text);
  if (!shape.ok()) return shape.status();

  const int64_t n = NumElements(*shape);
  const size_t item = DTypeSize(*dtype);
  if (n < 0 || npy.size() - offset != static_cast<uint64_t>(n) * item) {
    return NpyError(absl::StrCat("data has ", npy.size() - offset, " bytes, shape ",
                                 ShapeString(*shape), " of ", DTypeName(*dtype), " needs ",
                                 n * static_cast<int64_t>(item)));
  }
  std::string data = npy.substr(offset);
  if (*fortran == "True" && shape->size() > 1) data = FortranToC(data, *shape, item);
  if (*dtype == DType::kBool) {
    for (char& c : data) c = c != 0 ? 1 : 0;
  }
  return HostTensor(*dtype, std::move(*shape), std::move(data));
}

std::string HostTensor::ToNpy() const {
  std::string shape_text = "(";
  for (int64_t d : shape_) absl::StrAppend(&shape_text, d, shape_.size() == 1 ? "," : ", ");
  if (shape_.size() > 1) shape_text.resize(shape_text.size() - 2);
  shape_text += ")";
  std::string header = absl::StrCat("{'descr': '", DescrOf(dtype_),
                                    "', 'fortran_order': False, 'shape': ", shape_text, ", }");
  // numpy reserves room to rewrite the first dimension in place (GROWTH_AXIS_MAX_DIGITS = 21);
  // doing the same makes the files byte-identical to np.save's.
  if (const size_t digits = shape_.empty() ? 21 : absl::StrCat(shape_[0]).size(); digits < 21) {
    header.append(21 - digits, ' ');
  }
  // The data starts at a multiple of 64 bytes; the header ends with '\n'.
  auto padded = [&](size_t prefix) {
    size_t total = prefix + header.size() + 1;
    return header + std::string((64 - total % 64) % 64, ' ') + "\n";
  };
  std::string out(kNpyMagic, kNpyMagicLen);
  std::string h = padded(kNpyMagicLen + 2 + 2);
  if (h.size() <= 0xffff) {
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(h.size() & 0xff);
    out += static_cast<char>(h.size() >> 8);
  } else {
    h = padded(kNpyMagicLen + 2 + 4);
    out += '\x02';
    out += '\x00';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((h.size() >> (8 * i)) & 0xff);
  }
  out += h;
  out += bytes_;
  return out;
}

absl::StatusOr<HostTensor> HostTensor::ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ClientError(absl::StatusCode::kNotFound, INVALID_REQUEST,
                       absl::StrCat("npy: cannot open '", path, "'"), {{"path", path}});
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  absl::StatusOr<HostTensor> out = ParseNpy(buffer.str());
  if (!out.ok()) {
    absl::Status named(out.status().code(), absl::StrCat(out.status().message(), " (", path, ")"));
    out.status().ForEachPayload(
        [&](absl::string_view url, const absl::Cord& payload) { named.SetPayload(url, payload); });
    return named;
  }
  return out;
}

absl::Status HostTensor::WriteNpy(const std::string& path) const {
  if (absl::Status s = Validate(); !s.ok()) return s;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  std::string npy = ToNpy();
  out.write(npy.data(), static_cast<std::streamsize>(npy.size()));
  out.close();
  if (!out) {
    return ClientError(absl::StatusCode::kUnavailable, INVALID_REQUEST,
                       absl::StrCat("npy: cannot write '", path, "'"), {{"path", path}});
  }
  return absl::OkStatus();
}

}  // namespace tensord::client
