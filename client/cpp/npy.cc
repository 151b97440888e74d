// NumPy .npy reading and writing for HostTensor (format versions 1.0, 2.0 and 3.0).
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cpp/host_tensor.h"
#include "client/cpp/status.h"

namespace tensord::client {
namespace {

using ::tensord::v1::BAD_TENSOR_DATA;
using ::tensord::v1::DTYPE_MISMATCH;

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicLen = 6;

absl::Status NpyError(const std::string& what) {
  return ClientError(BAD_TENSOR_DATA, "npy: " + what);
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
  if (descr == "<f2") return DType::kF16;
  // One-byte dtypes have no byte order: numpy writes '|u1' and '|i1'.
  if (descr == "|u1" || descr == "<u1" || descr == "u1") return DType::kU8;
  if (descr == "|i1" || descr == "<i1" || descr == "i1") return DType::kI8;
  if (descr == "<i2") return DType::kI16;
  // NumPy has no bfloat16; tensord writes bf16 as its 16-bit patterns (see ToNpy).
  if (descr == "<u2") return DType::kBF16;
  if (!descr.empty() && descr[0] == '>') {
    return NpyError(
        absl::StrCat("big-endian dtype '", descr,
                     "' is not supported; convert with arr.astype(arr.dtype.newbyteorder('<'))"));
  }
  return ClientError(
      DTYPE_MISMATCH,
      absl::StrCat("npy: dtype '", descr,
                   "' is not supported (supported: <f4 <f8 <i4 <i8 |b1 <f2 |u1 |i1 <i2, and <u2 "
                   "read as bf16 bit patterns)"),
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
    case DType::kF16:
      return "<f2";
    case DType::kBF16:
      return "<u2";
    case DType::kU8:
      return "|u1";
    case DType::kI8:
      return "|i1";
    case DType::kI16:
      return "<i2";
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
    // A local file, not a request: a plain status with no tensord reason (docs/errors.md).
    return absl::NotFoundError(absl::StrCat("npy: cannot open '", path, "'"));
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
    return absl::UnavailableError(absl::StrCat("npy: cannot write '", path, "'"));
  }
  return absl::OkStatus();
}

}  // namespace tensord::client
