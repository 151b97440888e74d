// A reader of the Prometheus text exposition format (version 0.0.4), the format tensord's
// /metrics endpoint serves: enough for tensordctl stats to read samples and their labels.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tensordctl {

// One line `name{label="value",...} value [timestamp]`.
struct MetricSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // in order, values unescaped
  double value = 0;

  // The value of label `label`; "" when the sample has none (as Prometheus treats it).
  std::string Label(absl::string_view label) const;
};

// Every sample of an exposition, in order. Blank lines and lines starting with `#` (HELP,
// TYPE, comments) are skipped; values may be NaN, +Inf or -Inf; a label value's \\, \" and \n
// are unescaped. Anything else malformed is an InvalidArgument error naming the line, so that
// a page that is not an exposition (an HTML error page, another protocol) is refused.
absl::StatusOr<std::vector<MetricSample>> ParsePrometheusText(absl::string_view text);

}  // namespace tensordctl
