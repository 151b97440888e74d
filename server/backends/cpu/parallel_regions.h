// What an OpenMP parallel region costs this process, and how many of the intra-op threads a
// piece of work is worth: one per share worth kRegionsPerShare regions. oneDNN's primitives
// (onednn_primitive_threads.cc) and the loop kernels (loops.h) decide by it. A region costs its
// fork and join; a share too small for it makes the threads slower than one: on the 2-core
// development machine a [512, 64] x [64, 64] product took 36 us on one thread and 57-100 us on
// two, while [2048, 256] x [256, 256] took 1,448 us on one and 869 us on two.
#pragma once

#include <cstdint>

namespace tensord::cpu {

// What a thread's share must be worth, in parallel regions.
inline constexpr double kRegionsPerShare = 20;

// An empty parallel region over the calling thread's team, in microseconds: the median of
// regions run back to back, measured once (at the first call), within [0.5, 25].
double ParallelRegionMicros();

// The threads `work_micros` of one core's work is worth: one per share, at least one, at most
// the calling thread's team.
int ThreadsFor(double work_micros);

// The least output, in elements, that a loop kernel shares among the threads: two shares of a
// simple loop's work (about 12 bytes moved per element), and at least 64Ki elements.
int64_t ParallelElements();

// Sets the calling thread's OpenMP team size to `threads` for its later calls: OpenMP keeps it
// per thread, and the server's threads are not OpenMP's, so each sets it before its first
// kernel (--threads). Cheap when it is already that.
void UseTeam(int threads);

// Sets the calling thread's OpenMP team size (when `threads` > 0) while it lives.
class TeamScope {
 public:
  explicit TeamScope(int threads);
  ~TeamScope();
  TeamScope(const TeamScope&) = delete;
  TeamScope& operator=(const TeamScope&) = delete;

 private:
  const int outer_;
  bool changed_ = false;
};

}  // namespace tensord::cpu
