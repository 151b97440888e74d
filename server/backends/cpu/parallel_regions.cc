#include "server/backends/cpu/parallel_regions.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

namespace tensord::cpu {
namespace {

// Bounds on the measured cost, so that one slow or fast measurement cannot make all work
// serial or all of it shared.
constexpr double kMinRegionMicros = 0.5;
constexpr double kMaxRegionMicros = 25;
// A simple loop moves about 12 bytes per element (two f32 operands and the result) at about
// 10 bytes per ns on one core.
constexpr double kLoopMicrosPerElement = 12.0 / 1e4;
constexpr int64_t kMinParallelElements = int64_t{1} << 16;

double MeasureRegionMicros() {
  constexpr int kRegions = 101;
  std::vector<double> micros;
  micros.reserve(kRegions);
  int joined = 0;
  for (int i = 0; i < kRegions + 5; ++i) {
    const auto start = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : joined)
    joined += 1;
    const std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    if (i >= 5) micros.push_back(took.count());  // the first ones start the team
  }
  (void)joined;
  std::nth_element(micros.begin(), micros.begin() + kRegions / 2, micros.end());
  return std::clamp(micros[kRegions / 2], kMinRegionMicros, kMaxRegionMicros);
}

}  // namespace

double ParallelRegionMicros() {
  static const double micros = MeasureRegionMicros();
  return micros;
}

int ThreadsFor(double work_micros) {
  const int team = omp_get_max_threads();
  if (team <= 1) return team;
  const double shares = work_micros / (kRegionsPerShare * ParallelRegionMicros());
  return static_cast<int>(std::clamp(shares, 1.0, static_cast<double>(team)));
}

int64_t ParallelElements() {
  static const int64_t elements = std::max<int64_t>(
      kMinParallelElements,
      static_cast<int64_t>(2 * kRegionsPerShare * ParallelRegionMicros() / kLoopMicrosPerElement));
  return elements;
}

void UseTeam(int threads) {
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

TeamScope::TeamScope(int threads) : outer_(omp_get_max_threads()) {
  if (threads > 0 && threads != outer_) {
    omp_set_num_threads(threads);
    changed_ = true;
  }
}

TeamScope::~TeamScope() {
  if (changed_) omp_set_num_threads(outer_);
}

}  // namespace tensord::cpu
