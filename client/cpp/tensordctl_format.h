// How tensordctl writes sizes, rates and durations for people.
#pragma once

#include <string>

namespace tensordctl {

// "512 B", "1.5 KiB", "12.0 MiB", "3.2 GiB" (powers of 1024).
std::string HumanBytes(double bytes);
// "0.42 s", "12.0 s", "2m03s", "1h02m".
std::string HumanDuration(double seconds);

}  // namespace tensordctl
