// Timing shared by the benchmark drivers.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>
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

// Median wall times of `a` and of `b`, called alternately `reps` times each after `warmup`
// untimed pairs, so that a machine whose speed drifts during the run slows both alike.
inline std::pair<double, double> InterleavedMedianSeconds(int warmup, int reps,
                                                          const std::function<void()>& a,
                                                          const std::function<void()>& b) {
  for (int i = 0; i < warmup; ++i) {
    a();
    b();
  }
  std::vector<double> ta, tb;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    a();
    auto t1 = Clock::now();
    b();
    auto t2 = Clock::now();
    ta.push_back(Seconds(t0, t1));
    tb.push_back(Seconds(t1, t2));
  }
  std::sort(ta.begin(), ta.end());
  std::sort(tb.begin(), tb.end());
  return {ta[ta.size() / 2], tb[tb.size() / 2]};
}

}  // namespace tensord::bench
