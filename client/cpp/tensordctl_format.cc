#include "client/cpp/tensordctl_format.h"

#include <cmath>

#include "absl/strings/str_format.h"

namespace tensordctl {

std::string HumanBytes(double bytes) {
  if (!std::isfinite(bytes)) return "-";
  if (std::fabs(bytes) < 1024) return absl::StrFormat("%.0f B", bytes);
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = bytes / 1024;
  size_t unit = 0;
  while (std::fabs(value) >= 1024 && unit + 1 < sizeof(kUnits) / sizeof(kUnits[0])) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string HumanDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "-";
  if (seconds < 10) return absl::StrFormat("%.2f s", seconds);
  if (seconds < 60) return absl::StrFormat("%.1f s", seconds);
  const long long whole = std::llround(seconds);
  if (whole < 3600) return absl::StrFormat("%lldm%02llds", whole / 60, whole % 60);
  if (whole < 86400) return absl::StrFormat("%lldh%02lldm", whole / 3600, whole / 60 % 60);
  return absl::StrFormat("%lldd%02lldh", whole / 86400, whole / 3600 % 24);
}

}  // namespace tensordctl
