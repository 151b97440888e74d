#include "server/core/dtype.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/status.h"

namespace tensord {

size_t DTypeSize(DType dtype) {
  const dtype_table::Entry* entry = dtype_table::At(static_cast<int>(dtype));
  return entry ? entry->size : 0;
}

absl::string_view DTypeName(DType dtype) {
  const dtype_table::Entry* entry = dtype_table::At(static_cast<int>(dtype));
  return entry ? absl::string_view(entry->name.data(), entry->name.size()) : "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  const int index = dtype_table::IndexOfName(std::string_view(name.data(), name.size()));
  if (index >= 0) return static_cast<DType>(index);
  return Error(Reason::kDtypeMismatch, absl::StrCat("dtype: unknown dtype '", name, "'"),
               {{"dtype", std::string(name)}});
}

std::vector<DType> DTypeSet::ToVector() const {
  std::vector<DType> out;
  for (int i = 0; i < kNumDTypes; ++i) {
    if (bits_ & (1u << i)) out.push_back(static_cast<DType>(i));
  }
  return out;
}

std::string DTypeSet::ToString() const {
  std::vector<std::string> names;
  for (DType d : ToVector()) names.emplace_back(DTypeName(d));
  return absl::StrJoin(names, ",");
}

IntRange RangeOf(DType d) {
  switch (d) {
    case DType::kU8:
      return {0, 255};
    case DType::kI8:
      return {-128, 127};
    case DType::kI16:
      return {-32768, 32767};
    case DType::kI32:
      return {-2147483648.0, 2147483647.0};
    case DType::kBool:
      return {0, 1};
    default:
      return {-0x1p63, 0x1p63};
  }
}

bool FitsIn(DType d, double v) {
  const IntRange r = RangeOf(d);
  if (!std::isfinite(v)) return false;
  return d == DType::kU8 ? v >= -r.hi && v <= r.hi : r.Holds(v);
}

DType PromoteTypes(DType a, DType b) {
  // Neither 2-byte float represents the other (bf16 has the range, f16 the precision), nor
  // either 1-byte integer the other.
  if (IsLowPrecision(a) && IsLowPrecision(b) && a != b) return DType::kF32;
  if ((a == DType::kU8 && b == DType::kI8) || (a == DType::kI8 && b == DType::kU8)) {
    return DType::kI16;
  }
  auto rank = [](DType d) {
    switch (d) {
      case DType::kBool:
        return 0;
      case DType::kU8:
      case DType::kI8:
        return 1;
      case DType::kI16:
        return 2;
      case DType::kI32:
        return 3;
      case DType::kI64:
        return 4;
      case DType::kBF16:
      case DType::kF16:
        return 5;
      case DType::kF32:
        return 6;
      case DType::kF64:
        return 7;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace tensord
