// How many of the intra-op threads a oneDNN primitive runs on (onednn_common.h:
// PrimitiveThreads). oneDNN runs each primitive as an OpenMP parallel region over the calling
// thread's whole team, however little work it holds; a primitive gets the threads its work is
// worth instead (parallel_regions.h), estimated from its descriptors.
#include <algorithm>
#include <initializer_list>

#include "server/backends/cpu/onednn_common.h"
#include "server/backends/cpu/parallel_regions.h"

namespace tensord::cpu::onednn {
namespace {

// A core's rate, for the estimate: f32 products on oneDNN's JIT kernels (AVX2 to AVX-512)
// run at 50-150 flops per ns; memory-bound primitives move about 10 bytes per ns.
constexpr double kFlopsPerMicro = 1e5;
constexpr double kBytesPerMicro = 1e4;

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

int PrimitiveThreads(const dnnl::primitive_desc_base& pd) { return ThreadsFor(WorkMicros(pd)); }

}  // namespace tensord::cpu::onednn
