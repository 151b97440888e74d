// Op attributes: typed values validated against an op's AttrSpec list before dispatch, so
// kernels and shape rules read them without re-checking types.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "server/core/dtype.h"

namespace tensord {

// kScalar: an int or a float kept as given (no widening), for attributes whose PyTorch meaning
// depends on the Python type of the number (torch.arange(5) is i64, torch.arange(5.0) is f32).
// kIntsOrString: ints (as kInts) or one of the spec's `choices`, for PyTorch parameters that
// take either (a convolution's padding: ints, 'valid' or 'same').
enum class AttrType {
  kBool,
  kInt,
  kFloat,
  kString,
  kInts,
  kFloats,
  kDType,
  kScalar,
  kIntsOrString
};
const char* AttrTypeName(AttrType type);

// std::monostate means "absent" (an optional attribute with no default, e.g. sum's dim).
using AttrValue = std::variant<std::monostate, bool, int64_t, double, std::string,
                               std::vector<int64_t>, std::vector<double>>;
using AttrMap = std::map<std::string, AttrValue>;

struct AttrSpec {
  std::string name;
  AttrType type;
  AttrValue default_value;  // monostate: optional with no default, unless `required`
  bool required = false;
  std::vector<std::string> choices;  // allowed strings of kString (empty = any), kIntsOrString
  // Other names a call may give it by: PyTorch's spellings where tensord's differ (full_like's
  // fill_value for value, size for shape). Kernels and rules read it by `name` only.
  std::vector<std::string> aliases = {};
};

// Read access to validated attributes. ValidateAttrs filled every default from the op's spec,
// so the defaults live there once and readers never restate them; an optional attribute with
// no default (sum's dim, clamp's min) is tested with Has() first, and reading an absent one
// gives the type's zero value. Types were checked by ValidateAttrs.
class Attrs {
 public:
  Attrs() = default;
  explicit Attrs(AttrMap values) : values_(std::move(values)) {}

  bool Has(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  int64_t GetInt(const std::string& name) const;
  double GetFloat(const std::string& name) const;
  // A kScalar (or kInt/kFloat) attribute as a double, whichever alternative it holds.
  double GetNumber(const std::string& name) const;
  // True when the attribute is present and holds an integer (a kScalar given as an int).
  bool HoldsInt(const std::string& name) const;
  std::string GetString(const std::string& name) const;
  std::vector<int64_t> GetInts(const std::string& name) const;
  std::vector<double> GetFloats(const std::string& name) const;
  std::optional<DType> GetDType(const std::string& name) const;
  const AttrMap& map() const { return values_; }

 private:
  AttrMap values_;
};

// Checks names, types (ints widen to floats, a single int becomes a one-element list, a
// dtype is a string) and choices; fills defaults. BAD_ATTRIBUTE names the attribute.
absl::StatusOr<Attrs> ValidateAttrs(const std::string& op, const std::vector<AttrSpec>& specs,
                                    const AttrMap& given);

std::string AttrValueToString(const AttrValue& value);

}  // namespace tensord
