#include "server/core/dtype.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/status.h"

namespace tensord {

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
    case DType::kBF16:
    case DType::kF16:
      return 2;
  }
  return 0;
}

absl::string_view DTypeName(DType dtype) {
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
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "f16";
  }
  return "?";
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  if (name == "f32" || name == "float32" || name == "float") return DType::kF32;
  if (name == "f64" || name == "float64" || name == "double") return DType::kF64;
  if (name == "i32" || name == "int32" || name == "int") return DType::kI32;
  if (name == "i64" || name == "int64" || name == "long") return DType::kI64;
  if (name == "bool" || name == "b8") return DType::kBool;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "f16" || name == "float16" || name == "half") return DType::kF16;
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

DType PromoteTypes(DType a, DType b) {
  // Neither 2-byte float represents the other (bf16 has the range, f16 the precision).
  if (IsLowPrecision(a) && IsLowPrecision(b) && a != b) return DType::kF32;
  auto rank = [](DType d) {
    switch (d) {
      case DType::kBool:
        return 0;
      case DType::kI32:
        return 1;
      case DType::kI64:
        return 2;
      case DType::kBF16:
      case DType::kF16:
        return 3;
      case DType::kF32:
        return 4;
      case DType::kF64:
        return 5;
    }
    return 0;
  };
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace tensord
