// Kernels of the fused products (server/ops/fusion.h): the producer's oneDNN primitive (matmul
// or convolution) with the chain as oneDNN post-ops, so the result is written once, activated
// and added to while it is still in cache.
//
// oneDNN's activations differ from the loop kernels' where values are not finite (its relu maps
// NaN to 0, its exp NaN to inf), so a chain with an activation runs as post-ops only when no
// value can be: every operand finite and the largest possible magnitude of the product
// (k * max|x| * max|w| + the added maxima) far from overflow, and only where the operands that
// scan reads are few beside the output. Otherwise, and where oneDNN refuses the chain, the
// product runs alone and each post-op then runs in place with the kernel its own op
// would have had, so the result is the unfused calls' bit for bit.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "server/backends/cpu/linalg_kernels.h"
#include "server/backends/cpu/onednn_common.h"
#include "server/backends/cpu/onednn_conv.h"
#include "server/ops/fusion.h"
#include "server/ops/registry.h"

namespace tensord::cpu::onednn {
namespace {

using dnnl::algorithm;
using dnnl::memory;
using fusion::PostOp;

// How the product is computed: a GEMM form, or a convolution of `spatial` dims.
struct Producer {
  const OpDef* def = nullptr;
  GemmForm form = GemmForm::kMatmul;
  int spatial = 0;  // 0: a GEMM
};

// How an added operand spreads over the output: one value per element, one value, one per
// column of a product (its last dim) or one per channel of a convolution.
enum class Spread { kNone, kFull, kScalar, kLastDim, kChannel };

Spread SpreadOf(const Shape& operand, const Shape& out, int spatial) {
  const int64_t n = NumElements(operand);
  if (n == NumElements(out)) return Spread::kFull;  // the shape rule allows no growth
  if (n == 1) return Spread::kScalar;
  // The one dim of the operand (right-aligned with the output) that is not 1.
  const int offset = static_cast<int>(out.size()) - static_cast<int>(operand.size());
  int wide = -1;
  for (int i = 0; i < static_cast<int>(operand.size()); ++i) {
    if (operand[i] == 1) continue;
    if (wide >= 0) return Spread::kNone;
    wide = i + offset;
  }
  if (spatial == 0)
    return wide == static_cast<int>(out.size()) - 1 ? Spread::kLastDim : Spread::kNone;
  return wide == static_cast<int>(out.size()) - spatial - 1 ? Spread::kChannel : Spread::kNone;
}

std::optional<algorithm> Algorithm(PostOp p) {
  switch (p) {
    case PostOp::kRelu:
    case PostOp::kLeakyRelu:
      return algorithm::eltwise_relu;
    case PostOp::kSigmoid:
      return algorithm::eltwise_logistic;
    case PostOp::kTanh:
      return algorithm::eltwise_tanh;
    case PostOp::kGelu:
      return algorithm::eltwise_gelu_erf;
    case PostOp::kGeluTanh:
      return algorithm::eltwise_gelu_tanh;
    case PostOp::kSilu:
      return algorithm::eltwise_swish;
    case PostOp::kElu:
      return algorithm::eltwise_elu;
    case PostOp::kAdd:
      break;
  }
  return std::nullopt;
}

// The post-ops chain[from..] of call `c`, whose first added operand is input `operand`, for
// a primitive whose result is `plain` in the output tensor and `computed` inside the primitive:
// an operand as large as the result is read in the computed layout.
PostOpChain MakeChain(const KernelCall& c, const std::vector<PostOp>& chain, size_t from,
                      size_t operand, const memory::desc& plain, const memory::desc& computed,
                      int spatial) {
  PostOpChain out;
  const double alpha = c.attrs.GetFloat(fusion::kAlphaAttr);
  const memory::dims dims = plain.dims();
  for (size_t i = from; i < chain.size(); ++i) {
    const int index = static_cast<int>(i - from);
    if (chain[i] != PostOp::kAdd) {
      const float a = chain[i] == PostOp::kSilu                                    ? 1.0f
                      : chain[i] == PostOp::kLeakyRelu || chain[i] == PostOp::kElu ? float(alpha)
                                                                                   : 0.0f;
      out.ops.append_eltwise(1.0f, *Algorithm(chain[i]), a, 0.0f);
      continue;
    }
    const Tensor& t = c.inputs[operand++];
    memory::desc md = computed, layout = plain;
    const Spread spread = SpreadOf(t.shape(), c.outputs[0].shape(), spatial);
    if (spread != Spread::kFull) {
      memory::dims d(dims.size(), 1);
      if (spread == Spread::kLastDim) d.back() = dims.back();
      if (spread == Spread::kChannel) d[1] = dims[1];
      md = layout = PlainDesc(Shape(d.begin(), d.end()), DType::kF32);
    }
    out.ops.append_binary(algorithm::binary_add, md);
    out.operands.push_back({index, &t, md, layout});
  }
  return out;
}

// The largest magnitude in `t`, or +inf when a value is not finite.
double MaxAbs(const Tensor& t) {
  const int32_t m = MaxMagnitudeBits(t);
  if (m >= kInfinityBits) return std::numeric_limits<double>::infinity();
  float f;
  std::memcpy(&f, &m, sizeof f);
  return f;
}

// The most operand values an activation's finiteness scan reads per output value.
inline constexpr int64_t kScannedPerOutputValue = 4;

// Whether oneDNN's post-ops compute what the loop kernels do: adds always (an IEEE add is one
// add, NaN and inf included); activations only where no value of the product or its chain can
// leave the finite range, which scanning the operands proves.
bool PostOpsAgree(const KernelCall& c, const std::vector<PostOp>& chain, size_t n_producer,
                  int64_t k) {
  if (std::none_of(chain.begin(), chain.end(), fusion::IsActivation)) return true;
  // The scan reads every operand once; the post-ops save passes over the output. Where the
  // operands hold many times the output's values (a long reduction: an MLP's first layer),
  // the scan costs more than it saves, and the chain runs after the product instead.
  int64_t scanned = 0;
  for (const Tensor& t : c.inputs) scanned += t.numel();
  if (scanned > kScannedPerOutputValue * c.outputs[0].numel()) return false;
  double bound = static_cast<double>(k) * MaxAbs(c.inputs[0]) * MaxAbs(c.inputs[1]);
  if (n_producer == 3) bound += MaxAbs(c.inputs[2]);
  const double alpha = std::max(1.0, std::fabs(c.attrs.GetFloat(fusion::kAlphaAttr)));
  size_t operand = n_producer;
  for (PostOp p : chain) {
    // Every activation here is at most max(1, |alpha|) (|x| + 1) in magnitude.
    bound = p == PostOp::kAdd ? bound + MaxAbs(c.inputs[operand++]) : alpha * (bound + 1);
  }
  return bound < 1e36;  // NaN and inf fail too
}

// Runs `op`'s own kernel on `inputs` into `out` (the unfused form of a post-op, in place).
absl::Status RunPointwise(const std::string& op, const AttrMap& given, std::vector<Tensor> inputs,
                          Tensor& out, const KernelCall& c) {
  ASSIGN_OR_RETURN(const OpDef* def, OpRegistry::Builtin().Find(op));
  ASSIGN_OR_RETURN(Attrs attrs, ValidateAttrs(op, def->attrs, given));
  std::vector<DType> dtypes;
  std::vector<TensorMeta> metas;
  for (const Tensor& t : inputs) {
    dtypes.push_back(t.dtype());
    metas.push_back(t.meta());
  }
  const TensorMeta out_meta[] = {out.meta()};
  const Kernel* kernel = KernelTable::Get().Plan({*def, dtypes, &attrs, metas, out_meta});
  if (kernel == nullptr) return NotPlanned(c);
  std::vector<Tensor> outputs = {out};
  KernelCall call{*def, inputs, attrs, outputs, out_meta, c.account};
  return kernel->run(call);
}

// The chain applied to the product in c.outputs[0] by the post-ops' own kernels.
absl::Status RunChainUnfused(const KernelCall& c, const std::vector<PostOp>& chain,
                             size_t n_producer) {
  Tensor& y = c.outputs[0];
  const double alpha = c.attrs.GetFloat(fusion::kAlphaAttr);
  size_t operand = n_producer;
  for (PostOp p : chain) {
    AttrMap attrs;
    if (p == PostOp::kLeakyRelu) attrs["negative_slope"] = alpha;
    if (p == PostOp::kElu) attrs["alpha"] = alpha;
    if (p == PostOp::kGeluTanh) attrs["approximate"] = std::string("tanh");
    std::vector<Tensor> in = {y};
    if (p == PostOp::kAdd) in.push_back(c.inputs[operand++]);
    RETURN_IF_ERROR(RunPointwise(fusion::PostOpOpName(p), attrs, std::move(in), y, c));
  }
  return absl::OkStatus();
}

// The producer's own call: its inputs and the fused call's output.
KernelCall ProducerCall(const KernelCall& c, const Producer& producer, size_t n) {
  return KernelCall{*producer.def, c.inputs.first(n), c.attrs,
                    c.outputs,     c.output_metas,    c.account};
}

// Whether the chain starts with an add the product takes as its own bias where it has none: a
// value per column of a product (or one value), per channel of a convolution (whose bias is
// one value per output channel, never a single one).
bool FirstAddIsBias(const KernelCall& c, const std::vector<PostOp>& chain, size_t n, int spatial) {
  if (chain[0] != PostOp::kAdd || n != 2) return false;
  const Spread spread = SpreadOf(c.inputs[n].shape(), c.outputs[0].shape(), spatial);
  if (spatial != 0) return spread == Spread::kChannel;
  return spread == Spread::kScalar || spread == Spread::kLastDim;
}

// Whether every operand spread over the output's last dim spreads over the product's columns:
// a product with a vector operand has none (its output's last dim is a row dim then).
bool ColumnsFit(const KernelCall& c, const std::vector<PostOp>& chain, size_t n, int64_t m) {
  const Shape& out = c.outputs[0].shape();
  size_t operand = n;
  for (PostOp p : chain) {
    if (p != PostOp::kAdd) continue;
    if (SpreadOf(c.inputs[operand++].shape(), out, 0) == Spread::kLastDim &&
        (out.empty() || out.back() != m)) {
      return false;
    }
  }
  return true;
}

absl::Status RunFused(KernelCall& c, const Producer& producer) {
  ASSIGN_OR_RETURN(std::vector<PostOp> chain,
                   fusion::ParsePostOps(c.attrs.GetString(fusion::kPostOpsAttr)));
  const size_t n = static_cast<size_t>(c.attrs.GetInt(fusion::kProducerInputsAttr));
  KernelCall inner = ProducerCall(c, producer, n);
  const bool add_bias = FirstAddIsBias(c, chain, n, producer.spatial);
  const size_t from = add_bias ? 1 : 0;  // the post-ops after the bias
  if (producer.spatial == 0) {
    ASSIGN_OR_RETURN(GemmProblem p, GemmFor(inner, producer.form));
    SimplifyGemm(p);
    if (p.unfused_bias == nullptr && ColumnsFit(c, chain, n, p.m) &&
        PostOpsAgree(c, chain, n, p.k)) {
      if (add_bias && p.m > 0) {
        const Tensor& b = c.inputs[n];
        p.bias = b.raw();
        p.bias_n = b.numel() == 1 ? 1 : p.m;
      }
      // RunGemm's result: batch dims, rows, columns, row-major.
      Shape dst = p.batch;
      dst.push_back(p.n);
      dst.push_back(p.m);
      const memory::desc plain = PlainDesc(dst, DType::kF32);
      const PostOpChain post = MakeChain(c, chain, from, n + from, plain, plain, 0);
      if (RunGemm(p, from < chain.size() ? &post : nullptr)) return absl::OkStatus();
      // It ran on the loop GEMM, without the chain (and with the bias where it took one).
      if (add_bias) chain.erase(chain.begin());
      return RunChainUnfused(c, chain, n + from);
    }
    RunGemm(p);
    if (p.unfused_bias != nullptr) AddBroadcastBias(*p.unfused_bias, c.outputs[0]);
    return RunChainUnfused(c, chain, n);
  }
  ASSIGN_OR_RETURN(nn::ConvNdParams params,
                   nn::ReadConvNdParams(c.op.name, c.attrs, producer.spatial, false));
  const bool bias = n == 3 || add_bias;
  auto s =
      MakeConvSetup(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), params, bias);
  if (!s) return NotPlanned(c);
  const Tensor* b = n == 3 ? &c.inputs[2] : add_bias ? &c.inputs[n] : nullptr;
  const int64_t k = c.inputs[1].numel() / std::max<int64_t>(1, c.inputs[1].dim(0));
  if (PostOpsAgree(c, chain, n, k)) {
    const PostOpChain post =
        MakeChain(c, chain, from, n + from, s->y, ConvDstLayout(*s, bias), producer.spatial);
    if (RunConvForward(*s, c.inputs[0], c.inputs[1], b, c.outputs[0],
                       from < chain.size() ? &post : nullptr)) {
      return absl::OkStatus();
    }
  }
  // Without the chain, and without the add taken as a bias.
  if (add_bias) {
    s = MakeConvSetup(c.inputs[0].shape(), c.inputs[1].shape(), c.outputs[0].shape(), params,
                      false);
    if (!s) return NotPlanned(c);
  }
  RunConvForward(*s, c.inputs[0], c.inputs[1], n == 3 ? &c.inputs[2] : nullptr, c.outputs[0]);
  return RunChainUnfused(c, chain, n);
}

// Planned when the producer's own call would run on its oneDNN kernel and every added operand
// spreads over the output in a way a post-op reads.
bool Accepts(const KernelQuery& q, const Producer& producer) {
  absl::StatusOr<std::vector<PostOp>> chain =
      fusion::ParsePostOps(q.attrs->GetString(fusion::kPostOpsAttr));
  if (!chain.ok()) return false;
  const size_t n = static_cast<size_t>(q.attrs->GetInt(fusion::kProducerInputsAttr));
  if (n > q.inputs.size()) return false;
  const KernelQuery inner{*producer.def,     q.dtypes.first(n), q.attrs,
                          q.inputs.first(n), q.outputs,         q.device};
  const Kernel* kernel = KernelTable::Get().Plan(inner);
  if (kernel == nullptr || kernel->name.rfind("onednn_", 0) != 0) return false;
  for (size_t i = n; i < q.inputs.size(); ++i) {
    if (SpreadOf(q.inputs[i].shape, q.outputs[0].shape, producer.spatial) == Spread::kNone) {
      return false;
    }
  }
  return true;
}

}  // namespace

void RegisterFusionKernels(KernelTable& t) {
  const std::pair<const char*, Producer> producers[] = {
      {"linear", {nullptr, GemmForm::kLinear, 0}},
      {"matmul", {nullptr, GemmForm::kMatmul, 0}},
      {"conv2d", {nullptr, GemmForm::kMatmul, 2}},
      {"conv3d", {nullptr, GemmForm::kMatmul, 3}},
  };
  for (const auto& entry : producers) {
    const char* name = entry.first;
    Producer producer = entry.second;
    absl::StatusOr<const OpDef*> def = OpRegistry::Builtin().Find(name);
    if (!def.ok()) continue;
    producer.def = *def;
    const std::string fused = fusion::FusedOpName(name);
    t.Add(
        fused,
        Kernel{"onednn_" + fused, [](absl::Span<const DType> d, const Attrs*) { return AllF32(d); },
               [producer](KernelCall& c) {
                 return Guard(c.op.name, [&] { return RunFused(c, producer); });
               },
               DTypeSet(), [producer](const KernelQuery& q) { return Accepts(q, producer); }});
  }
}

}  // namespace tensord::cpu::onednn
