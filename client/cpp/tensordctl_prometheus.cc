#include "client/cpp/tensordctl_prometheus.h"

#include <cstdint>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tensordctl {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// Whether there were any.
bool SkipSpaces(absl::string_view& s) {
  const size_t before = s.size();
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  return s.size() != before;
}

// A metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or, without colons, a label name; "" if none.
absl::string_view TakeName(absl::string_view& s, bool colons) {
  size_t n = 0;
  while (n < s.size()) {
    const char c = s[n];
    const bool ok = absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '_' ||
                    (colons && c == ':') ||
                    (n > 0 && absl::ascii_isdigit(static_cast<unsigned char>(c)));
    if (!ok) break;
    ++n;
  }
  absl::string_view name = s.substr(0, n);
  s.remove_prefix(n);
  return name;
}

// A quoted label value, its escapes undone; `s` starts at the opening quote.
absl::StatusOr<std::string> TakeLabelValue(absl::string_view& s) {
  if (s.empty() || s.front() != '"')
    return absl::InvalidArgumentError("a label value must be quoted");
  std::string out;
  for (size_t i = 1; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '"') {
      s.remove_prefix(i + 1);
      return out;
    }
    if (c != '\\') {
      out += c;
      continue;
    }
    if (++i == s.size()) break;
    switch (s[i]) {
      case '\\':
        out += '\\';
        break;
      case '"':
        out += '"';
        break;
      case 'n':
        out += '\n';
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("unknown escape \\", s.substr(i, 1)));
    }
  }
  return absl::InvalidArgumentError("a label value has no closing quote");
}

// Go's ParseFloat spellings, which Prometheus writes: NaN, +Inf, -Inf (any case), decimals.
bool ParseValue(absl::string_view text, double* value) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "nan") {
    *value = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (lower == "+inf" || lower == "inf" || lower == "-inf") {
    *value = lower[0] == '-' ? -std::numeric_limits<double>::infinity()
                             : std::numeric_limits<double>::infinity();
    return true;
  }
  return absl::SimpleAtod(text, value);
}

absl::StatusOr<MetricSample> ParseSample(absl::string_view line) {
  MetricSample sample;
  sample.name = std::string(TakeName(line, /*colons=*/true));
  if (sample.name.empty()) return absl::InvalidArgumentError("no metric name");
  // Whether a space ends the name or the labels: "x_total1" is no name and value.
  bool spaced = SkipSpaces(line);
  if (!line.empty() && line.front() == '{') {
    line.remove_prefix(1);
    while (true) {
      SkipSpaces(line);
      if (!line.empty() && line.front() == '}') break;
      const absl::string_view label = TakeName(line, /*colons=*/false);
      if (label.empty()) return absl::InvalidArgumentError("no label name");
      SkipSpaces(line);
      if (line.empty() || line.front() != '=') {
        return absl::InvalidArgumentError(absl::StrCat("label ", label, " has no '='"));
      }
      line.remove_prefix(1);
      SkipSpaces(line);
      absl::StatusOr<std::string> value = TakeLabelValue(line);
      if (!value.ok()) return value.status();
      sample.labels.emplace_back(std::string(label), *std::move(value));
      SkipSpaces(line);
      // Pairs are separated by commas; a trailing comma is allowed.
      if (!line.empty() && line.front() == ',') {
        line.remove_prefix(1);
      } else if (line.empty() || line.front() != '}') {
        return absl::InvalidArgumentError("labels must be separated by ',' and end with '}'");
      }
    }
    line.remove_prefix(1);  // '}'
    spaced = SkipSpaces(line);
  }
  if (line.empty()) return absl::InvalidArgumentError("no value");
  if (!spaced) return absl::InvalidArgumentError("no space before the value");
  std::vector<absl::string_view> fields =
      absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (fields.empty() || fields.size() > 2) {
    return absl::InvalidArgumentError("expected a value and at most a timestamp");
  }
  if (!ParseValue(fields[0], &sample.value)) {
    return absl::InvalidArgumentError(absl::StrCat("'", fields[0], "' is not a number"));
  }
  int64_t timestamp_ms = 0;
  if (fields.size() == 2 && !absl::SimpleAtoi(fields[1], &timestamp_ms)) {
    return absl::InvalidArgumentError(absl::StrCat("'", fields[1], "' is not a timestamp"));
  }
  return sample;
}

}  // namespace

std::string MetricSample::Label(absl::string_view label) const {
  for (const auto& [name, value] : labels) {
    if (name == label) return value;
  }
  return "";
}

absl::StatusOr<std::vector<MetricSample>> ParsePrometheusText(absl::string_view text) {
  std::vector<MetricSample> samples;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    absl::ConsumeSuffix(&line, "\r");
    SkipSpaces(line);
    if (line.empty() || line.front() == '#') continue;
    absl::StatusOr<MetricSample> sample = ParseSample(line);
    if (!sample.ok()) {
      constexpr size_t kShown = 80;  // of a line quoted in the error
      return absl::InvalidArgumentError(
          absl::StrCat("line ", number, ": ", sample.status().message(), ": \"",
                       line.substr(0, kShown), line.size() > kShown ? "..." : "", "\""));
    }
    samples.push_back(*std::move(sample));
  }
  return samples;
}

}  // namespace tensordctl
