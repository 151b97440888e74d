#include "server/ops/attrs.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/core/status.h"

namespace tensord {

const char* AttrTypeName(AttrType type) {
  switch (type) {
    case AttrType::kBool:
      return "bool";
    case AttrType::kInt:
      return "int";
    case AttrType::kFloat:
      return "float";
    case AttrType::kString:
      return "string";
    case AttrType::kInts:
      return "ints";
    case AttrType::kFloats:
      return "floats";
    case AttrType::kDType:
      return "dtype";
    case AttrType::kScalar:
      return "scalar";
    case AttrType::kIntsOrString:
      return "ints_or_string";
  }
  return "?";
}

namespace {

// The attribute's value, or null when it is absent or none: one lookup for every getter.
const AttrValue* Find(const AttrMap& values, const std::string& name) {
  auto it = values.find(name);
  if (it == values.end() || std::holds_alternative<std::monostate>(it->second)) return nullptr;
  return &it->second;
}

}  // namespace

bool Attrs::Has(const std::string& name) const { return Find(values_, name) != nullptr; }

bool Attrs::GetBool(const std::string& name) const {
  const AttrValue* v = Find(values_, name);
  return v != nullptr && std::get<bool>(*v);
}
int64_t Attrs::GetInt(const std::string& name) const {
  const AttrValue* v = Find(values_, name);
  return v != nullptr ? std::get<int64_t>(*v) : 0;
}
double Attrs::GetFloat(const std::string& name) const {
  const AttrValue* v = Find(values_, name);
  return v != nullptr ? std::get<double>(*v) : 0;
}
double Attrs::GetNumber(const std::string& name) const {
  const AttrValue* v = Find(values_, name);
  if (v == nullptr) return 0;
  if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return std::get<double>(*v);
}
bool Attrs::HoldsInt(const std::string& name) const {
  const AttrValue* v = Find(values_, name);
  return v != nullptr && std::holds_alternative<int64_t>(*v);
}
std::string Attrs::GetString(const std::string& name) const {
  const AttrValue* v = Find(values_, name);
  return v != nullptr ? std::get<std::string>(*v) : std::string();
}
std::vector<int64_t> Attrs::GetInts(const std::string& name) const {
  const AttrValue* v = Find(values_, name);
  return v != nullptr ? std::get<std::vector<int64_t>>(*v) : std::vector<int64_t>{};
}
std::vector<double> Attrs::GetFloats(const std::string& name) const {
  const AttrValue* v = Find(values_, name);
  return v != nullptr ? std::get<std::vector<double>>(*v) : std::vector<double>{};
}
std::optional<DType> Attrs::GetDType(const std::string& name) const {
  const AttrValue* v = Find(values_, name);
  if (v == nullptr) return std::nullopt;
  auto d = ParseDType(std::get<std::string>(*v));
  if (!d.ok()) return std::nullopt;
  return *d;
}

std::string AttrValueToString(const AttrValue& value) {
  struct Visitor {
    std::string operator()(std::monostate) const { return "none"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return absl::StrCat(i); }
    std::string operator()(double d) const { return absl::StrCat(d); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::vector<int64_t>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ","), "]");
    }
    std::string operator()(const std::vector<double>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ","), "]");
    }
  };
  return std::visit(Visitor{}, value);
}

namespace {

absl::Status BadAttr(const std::string& op, const std::string& name, const std::string& why,
                     const std::string& value = "") {
  const std::string got = value.empty() ? "" : absl::StrCat(", got '", value, "'");
  return Error(Reason::kBadAttribute, absl::StrCat(op, ": attribute '", name, "' ", why, got),
               {{"op", op}, {"attribute", name}, {"value", value}});
}

// Converts `v` to `type` where the conversion is lossless and unsurprising.
absl::StatusOr<AttrValue> Coerce(const std::string& op, const AttrSpec& spec, const AttrValue& v) {
  const std::string shown = AttrValueToString(v);
  auto wrong = [&] {
    return BadAttr(op, spec.name, absl::StrCat("must be ", AttrTypeName(spec.type)), shown);
  };
  switch (spec.type) {
    case AttrType::kBool:
      if (std::holds_alternative<bool>(v)) return v;
      return wrong();
    case AttrType::kInt:
      if (std::holds_alternative<int64_t>(v)) return v;
      return wrong();
    case AttrType::kFloat:
      if (const auto* i = std::get_if<int64_t>(&v)) return AttrValue(static_cast<double>(*i));
      if (const auto* d = std::get_if<double>(&v)) {
        if (std::isnan(*d)) return BadAttr(op, spec.name, "must not be NaN", shown);
        return v;
      }
      return wrong();
    case AttrType::kIntsOrString:
      if (std::holds_alternative<std::vector<int64_t>>(v)) return v;
      if (const auto* i = std::get_if<int64_t>(&v)) return AttrValue(std::vector<int64_t>{*i});
      if (const auto* s = std::get_if<std::string>(&v)) {
        if (std::find(spec.choices.begin(), spec.choices.end(), *s) == spec.choices.end()) {
          return BadAttr(op, spec.name,
                         absl::StrCat("must be ints or one of ", absl::StrJoin(spec.choices, "|")),
                         shown);
        }
        return v;
      }
      return BadAttr(op, spec.name,
                     absl::StrCat("must be ints or one of ", absl::StrJoin(spec.choices, "|")),
                     shown);
    case AttrType::kString:
      if (const auto* s = std::get_if<std::string>(&v)) {
        if (!spec.choices.empty() &&
            std::find(spec.choices.begin(), spec.choices.end(), *s) == spec.choices.end()) {
          return BadAttr(op, spec.name,
                         absl::StrCat("must be one of ", absl::StrJoin(spec.choices, "|")), shown);
        }
        return v;
      }
      return wrong();
    case AttrType::kInts:
      if (std::holds_alternative<std::vector<int64_t>>(v)) return v;
      if (const auto* i = std::get_if<int64_t>(&v)) return AttrValue(std::vector<int64_t>{*i});
      return wrong();
    case AttrType::kFloats:
      if (std::holds_alternative<std::vector<double>>(v)) return v;
      if (const auto* l = std::get_if<std::vector<int64_t>>(&v)) {
        return AttrValue(std::vector<double>(l->begin(), l->end()));
      }
      if (const auto* d = std::get_if<double>(&v)) return AttrValue(std::vector<double>{*d});
      if (const auto* i = std::get_if<int64_t>(&v)) {
        return AttrValue(std::vector<double>{static_cast<double>(*i)});
      }
      return wrong();
    case AttrType::kDType:
      if (const auto* s = std::get_if<std::string>(&v)) {
        if (!ParseDType(*s).ok()) return BadAttr(op, spec.name, "is not a known dtype", shown);
        return v;
      }
      return wrong();
    case AttrType::kScalar:
      if (std::holds_alternative<int64_t>(v)) return v;
      if (const auto* d = std::get_if<double>(&v)) {
        if (std::isnan(*d)) return BadAttr(op, spec.name, "must not be NaN", shown);
        return v;
      }
      return wrong();
  }
  return wrong();
}

}  // namespace

absl::StatusOr<Attrs> ValidateAttrs(const std::string& op, const std::vector<AttrSpec>& specs,
                                    const AttrMap& given) {
  // Aliases resolve to their attribute's name first; naming one attribute twice is an error.
  AttrMap named;
  for (const auto& [name, value] : given) {
    const AttrSpec* spec = nullptr;
    for (const AttrSpec& s : specs) {
      if (s.name == name ||
          std::find(s.aliases.begin(), s.aliases.end(), name) != s.aliases.end()) {
        spec = &s;
      }
    }
    if (spec == nullptr) return BadAttr(op, name, "is not an attribute of this op");
    if (!named.emplace(spec->name, value).second) {
      return BadAttr(op, spec->name,
                     absl::StrCat("is given twice (also as '", name, "', another name of it)"));
    }
  }
  AttrMap out;
  for (const AttrSpec& spec : specs) {
    auto it = named.find(spec.name);
    if (it == named.end() || std::holds_alternative<std::monostate>(it->second)) {
      if (spec.required) return BadAttr(op, spec.name, "is required");
      out[spec.name] = spec.default_value;
      continue;
    }
    ASSIGN_OR_RETURN(out[spec.name], Coerce(op, spec, it->second));
  }
  return Attrs(std::move(out));
}

}  // namespace tensord
