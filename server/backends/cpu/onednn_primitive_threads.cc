// How many of the intra-op threads a oneDNN primitive runs on (onednn_common.h:
// PrimitiveThreads). oneDNN runs each primitive as an OpenMP parallel region over the calling
// thread's whole team, however little work it holds, and a region costs its fork and join. A
// primitive whose share per thread is small spends more on them than the threads save: on the
// 2-core development machine a [512, 64] x [64, 64] product took 36 us on one thread and 57-100
// us on two, while [2048, 256] x [256, 256] took 1,448 us on one and 869 us on two. So a
// primitive gets one thread per share of work worth kRegionsPerShare parallel regions, as this
// process measured one (an empty region over the team, once, at the first primitive built).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <vector>

#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu::onednn {
namespace {

// A core's rate, for the estimate: f32 products on oneDNN's JIT kernels (AVX2 to AVX-512)
// run at 50-150 flops per ns; memory-bound primitives move about 10 bytes per ns.
constexpr double kFlopsPerMicro = 1e5;
constexpr double kBytesPerMicro = 1e4;
// What a thread's share must be worth, in parallel regions.
constexpr double kRegionsPerShare = 20;
// Bounds on the measured region cost, so that one slow or fast measurement cannot make every
// primitive serial or every one parallel.
constexpr double kMinRegionMicros = 0.5;
constexpr double kMaxRegionMicros = 25;

// The median of empty parallel regions over the calling thread's team, in microseconds.
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

double Elements(const dnnl::memory::desc& md) {
  if (md.get_size() == 0) return 0;
  double n = 1;
  for (int64_t d : md.dims()) n *= static_cast<double>(d);
  return n;
}

// The first of the descriptors `pd` has for `queries`, or a zero one.
dnnl::memory::desc First(const dnnl::primitive_desc_base& pd,
                         std::initializer_list<dnnl::query> queries) {
  for (dnnl::query q : queries) {
    dnnl::memory::desc md = pd.query_md(q);
    if (md.get_size() != 0) return md;
  }
  return {};
}

// One core's time for the primitive, estimated from its descriptors.
double WorkMicros(const dnnl::primitive_desc_base& pd) {
  using dnnl::query;
  using Kind = dnnl::primitive::kind;
  const Kind kind = pd.get_kind();
  if (kind == Kind::matmul || kind == Kind::inner_product || kind == Kind::convolution ||
      kind == Kind::deconvolution) {
    // Every output value is a dot product over the weights of its output channel (matmul: its
    // row of src against a column of weights).
    const dnnl::memory::desc out = First(pd, {query::dst_md, query::diff_dst_md});
    const dnnl::memory::desc src = First(pd, {query::src_md, query::diff_src_md});
    const dnnl::memory::desc w = First(pd, {query::weights_md, query::diff_weights_md});
    double per_output = 0;
    if (kind == Kind::matmul) {
      per_output = src.get_size() ? static_cast<double>(src.dims().back()) : 0;
    } else if (w.get_size() != 0) {
      const dnnl::memory::dims wd = w.dims();
      // Grouped weights have one more dimension than the data: [g, O/g, I/g, k...].
      const bool grouped = src.get_size() != 0 && wd.size() > src.dims().size();
      const double channels =
          static_cast<double>(wd[0]) * (grouped ? static_cast<double>(wd[1]) : 1.0);
      per_output = Elements(w) / std::max(channels, 1.0);
    }
    return 2 * Elements(out) * per_output / kFlopsPerMicro;
  }
  double bytes = 0;
  for (query q :
       {query::src_md, query::diff_src_md, query::weights_md, query::dst_md, query::diff_dst_md}) {
    bytes += static_cast<double>(pd.query_md(q).get_size());
  }
  bytes += static_cast<double>(pd.query_md(query::src_md, 1).get_size());
  return bytes / kBytesPerMicro;
}

}  // namespace

double ParallelRegionMicros() {
  static const double micros = MeasureRegionMicros();
  return micros;
}

int PrimitiveThreads(const dnnl::primitive_desc_base& pd) {
  const int team = omp_get_max_threads();
  if (team <= 1) return team;
  const double share = kRegionsPerShare * ParallelRegionMicros();
  const double shares = WorkMicros(pd) / share;
  return static_cast<int>(std::clamp(shares, 1.0, static_cast<double>(team)));
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

}  // namespace tensord::cpu::onednn
