#include "server/core/matmul_precision.h"

#include "absl/strings/str_cat.h"
#include "server/core/status.h"

namespace tensord {
absl::StatusOr<MatmulPrecision> ParseMatmulPrecision(absl::string_view text,
                                                     absl::string_view field) {
  if (text.empty() || text == "highest") return MatmulPrecision::kHighest;
  if (text == "high") return MatmulPrecision::kHigh;
  if (text == "medium") return MatmulPrecision::kMedium;
  return Error(Reason::kInvalidRequest,
               absl::StrCat(field, ": '", text, "' is not one of highest, high, medium"),
               {{"field", std::string(field)}, {"value", std::string(text)}});
}

const char* MatmulPrecisionName(MatmulPrecision p) {
  switch (p) {
    case MatmulPrecision::kHigh:
      return "high";
    case MatmulPrecision::kMedium:
      return "medium";
    case MatmulPrecision::kHighest:
      break;
  }
  return "highest";
}

}  // namespace tensord
