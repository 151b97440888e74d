// oneDNN f32 kernels for pointwise activations and math (eltwise primitive) and for softmax
// (softmax_v2). Only functions whose oneDNN 2.6 result matches PyTorch's are registered:
// relu and exp are not, because oneDNN's relu maps NaN to 0 and its exp maps NaN to inf; log
// and log_softmax are not (its log errs by ~1e-6 absolute near 1, a 1e-4 relative error in
// log-probabilities near 0), nor softplus (oneDNN's soft_relu turns negative below -15), nor
// leaky_relu with a zero slope (it takes relu's NaN path).
#include <cmath>
#include <unordered_map>

#include "server/backends/cpu/onednn_common.h"

namespace tensord::cpu::onednn {
namespace {

using dnnl::algorithm;
using dnnl::memory;

struct EltwiseSpec {
  std::string op;
  // Chooses the algorithm and its alpha for a call, or returns false to decline it.
  std::function<bool(const Attrs&, algorithm*, float*)> choose;
};

absl::Status RunEltwise(KernelCall& c, algorithm alg, float alpha) {
  const int64_t n = c.outputs[0].numel();
  const memory::desc md = PlainDesc({n}, DType::kF32);
  auto prim = GetPrimitive(
      "eltwise",
      [&] { return absl::StrCat("eltwise|", static_cast<int>(alg), "|", n, "|", alpha); },
      [&] {
        dnnl::eltwise_forward::primitive_desc pd(
            dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, md, alpha, 0.f),
            Attr(), Engine());
        return CachedPrimitive{dnnl::eltwise_forward(pd), pd};
      });
  Execute(*prim, {{DNNL_ARG_SRC, Wrap(c.inputs[0], md)}, {DNNL_ARG_DST, Wrap(c.outputs[0], md)}});
  return absl::OkStatus();
}

EltwiseSpec Fixed(const std::string& op, algorithm alg, float alpha = 0.f) {
  return {op, [alg, alpha](const Attrs&, algorithm* a, float* al) {
            *a = alg;
            *al = alpha;
            return true;
          }};
}

std::vector<EltwiseSpec> EltwiseSpecs() {
  return {
      Fixed("sigmoid", algorithm::eltwise_logistic),
      Fixed("tanh", algorithm::eltwise_tanh),
      Fixed("silu", algorithm::eltwise_swish, 1.f),
      Fixed("sqrt", algorithm::eltwise_sqrt),
      Fixed("abs", algorithm::eltwise_abs),
      Fixed("square", algorithm::eltwise_square),
      {"gelu",
       [](const Attrs& at, algorithm* a, float* al) {
         *a = at.GetString("approximate") == "tanh" ? algorithm::eltwise_gelu_tanh
                                                    : algorithm::eltwise_gelu_erf;
         *al = 0.f;
         return true;
       }},
      {"elu",
       [](const Attrs& at, algorithm* a, float* al) {
         *a = algorithm::eltwise_elu;
         *al = static_cast<float>(at.GetFloat("alpha"));
         return true;
       }},
      {"leaky_relu",
       [](const Attrs& at, algorithm* a, float* al) {
         *a = algorithm::eltwise_relu;
         *al = static_cast<float>(at.GetFloat("negative_slope"));
         return *al != 0.f;
       }},
  };
}

// softmax along `dim`, with the input seen as [outer, size, inner].
absl::Status RunSoftmax(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  // PyTorch's max-subtracted softmax turns a row holding NaN or +-inf into NaN/0/1 patterns
  // oneDNN does not reproduce: such inputs go to the loop kernel (the one refusal that depends
  // on values, so it is made here and not when the call is planned).
  const float* p = x.data<float>();
  bool finite = true;
  for (int64_t i = 0, n = x.numel(); i < n; ++i) finite &= std::isfinite(p[i]);
  if (!finite) return HandOn(c, "onednn_softmax");
  const int64_t rank = x.rank();
  int64_t dim = c.attrs.GetInt("dim");
  if (dim < 0) dim += std::max<int64_t>(rank, 1);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < dim) outer *= x.dim(d);
    if (d > dim) inner *= x.dim(d);
  }
  const int64_t size = rank == 0 ? 1 : x.dim(dim);
  const memory::desc md = PlainDesc({outer, size, inner}, DType::kF32);
  auto prim = GetPrimitive(
      "softmax", [&] { return absl::StrCat("softmax|", DescKey(md)); },
      [&] {
        using F = dnnl::softmax_v2_forward;
        F::primitive_desc pd(
            F::desc(dnnl::prop_kind::forward_inference, algorithm::softmax_accurate, md, md, 1),
            Attr(), Engine());
        return CachedPrimitive{F(pd), pd};
      });
  Execute(*prim, {{DNNL_ARG_SRC, Wrap(x, md)}, {DNNL_ARG_DST, Wrap(c.outputs[0], md)}});
  return absl::OkStatus();
}

}  // namespace

void RegisterEltwiseKernels(KernelTable& t) {
  for (const EltwiseSpec& spec : EltwiseSpecs()) {
    auto choose = spec.choose;
    t.Add(spec.op, Kernel{"onednn_" + spec.op,
                          [choose](absl::Span<const DType> d, const Attrs* a) {
                            if (!AllF32(d) || d.size() != 1) return false;
                            algorithm alg;
                            float alpha;
                            return a == nullptr || choose(*a, &alg, &alpha);
                          },
                          [choose](KernelCall& c) -> absl::Status {
                            algorithm alg;
                            float alpha;
                            if (!choose(c.attrs, &alg, &alpha)) return NotPlanned(c);
                            return Guard(c.op.name, [&] { return RunEltwise(c, alg, alpha); });
                          },
                          DTypeSet(),
                          // Small tensors run faster in the loop kernels (kMinElementwiseSize).
                          [](const KernelQuery& q) {
                            return q.outputs[0].dtype == DType::kF32 &&
                                   NumElements(q.outputs[0].shape) >= kMinElementwiseSize;
                          }});
  }
  t.Add("softmax", Kernel{"onednn_softmax", F32InOut,
                          [](KernelCall& c) -> absl::Status {
                            return Guard(c.op.name, [&] { return RunSoftmax(c); });
                          },
                          DTypeSet(),
                          [](const KernelQuery& q) {
                            return NumElements(q.inputs[0].shape) >= kMinElementwiseSize;
                          }});
}

}  // namespace tensord::cpu::onednn
