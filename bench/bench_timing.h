// Timing shared by the benchmark drivers.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace tensord::bench {

using Clock = std::chrono::steady_clock;

inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Median wall time of `reps` runs of `fn` after `warmup` untimed runs.
inline double MedianSeconds(int warmup, int reps, const std::function<void()>& fn) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto a = Clock::now();
    fn();
    t.push_back(Seconds(a, Clock::now()));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace tensord::bench
