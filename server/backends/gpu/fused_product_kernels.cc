// The GPU kernels of the fused products (server/ops/fusion.h: fused_linear, fused_matmul,
// fused_conv2d, fused_conv3d): the producer's own kernel writes the output, then the post-ops run
// over it in place as one fused_elementwise expression whose leaves are the output and the added
// operands (fused_elementwise_kernels.cc). Every value is, bit for bit, what the calls the fused
// op replaced give on the same device: the producer's kernel is theirs, and the expression's
// steps are their maps, compiled without contraction. The chain reads and writes the output
// once instead of once per post-op, and a program on a GPU device fuses as one on the CPU does.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/core/status.h"
#include "server/ops/elementwise_fusion.h"
#include "server/ops/fusion.h"
#include "server/ops/registry.h"

namespace tensord::gpu {
namespace {

using fusion::Fn;
using fusion::PostOp;
using fusion::Step;

// The fused_elementwise function of each activation post-op, and whether it takes post_alpha.
struct Activation {
  PostOp post;
  Fn fn;
  bool alpha;
};
constexpr Activation kActivations[] = {
    {PostOp::kRelu, Fn::kRelu, false},          {PostOp::kSigmoid, Fn::kSigmoid, false},
    {PostOp::kTanh, Fn::kTanh, false},          {PostOp::kGelu, Fn::kGelu, false},
    {PostOp::kGeluTanh, Fn::kGeluTanh, false},  {PostOp::kSilu, Fn::kSilu, false},
    {PostOp::kLeakyRelu, Fn::kLeakyRelu, true}, {PostOp::kElu, Fn::kElu, true},
};

// The post-ops as a fused_elementwise expression over the producer's output ($0) and the
// added operands ($1, ...).
absl::StatusOr<std::string> ChainSteps(const Attrs& attrs) {
  ASSIGN_OR_RETURN(std::vector<PostOp> chain,
                   fusion::ParsePostOps(attrs.GetString(fusion::kPostOpsAttr)));
  const double alpha = attrs.GetFloat(fusion::kAlphaAttr);
  std::vector<Step> steps(1);
  steps[0].input = true;
  int operand = 1;
  for (PostOp p : chain) {
    Step s;
    if (p == PostOp::kAdd) {
      Step leaf;
      leaf.input = true;
      leaf.index = operand++;
      steps.push_back(leaf);
      s.fn = Fn::kAdd;
      s.a = 1;
    }
    for (const Activation& a : kActivations) {
      if (a.post != p) continue;
      s.fn = a.fn;
      if (a.alpha) s.a = alpha;
    }
    steps.push_back(s);
  }
  return fusion::FormatSteps(steps);
}

const OpDef& ElementwiseDef() {
  static const OpDef* def = *OpRegistry::Builtin().Find(fusion::kElementwiseOp);
  return *def;
}

absl::Status RunFusedProduct(KernelCall& c, DeviceRuntime& device, const OpDef* producer) {
  const size_t n = static_cast<size_t>(c.attrs.GetInt(fusion::kProducerInputsAttr));
  const GpuKernelTable& table = GpuKernelTable::Get();
  const GpuKernel* produce = table.Find(*producer);
  const GpuKernel* chain = table.Find(ElementwiseDef());
  if (produce == nullptr || chain == nullptr || n > c.inputs.size()) {
    return Error(Reason::kInternal,
                 absl::StrCat(device.name(), ": ", c.op.name, " has no producer or chain kernel"),
                 {{"op", c.op.name}, {"device", device.name()}});
  }
  const Attrs producer_attrs(fusion::ProducerAttrs(c.attrs.map()));
  KernelCall inner{*producer, c.inputs.first(n), producer_attrs,
                   c.outputs, c.output_metas,    c.account};
  RETURN_IF_ERROR(produce->run(inner, device));
  if (c.outputs[0].numel() == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(std::string steps, ChainSteps(c.attrs));
  std::vector<Tensor> leaves = {c.outputs[0]};
  leaves.insert(leaves.end(), c.inputs.begin() + n, c.inputs.end());
  const Attrs chain_attrs(AttrMap{{fusion::kStepsAttr, steps}});
  KernelCall post{ElementwiseDef(), leaves, chain_attrs, c.outputs, c.output_metas, c.account};
  return chain->run(post, device);
}

// Planned when the producer's own call runs here and the chain is an expression the device's
// fused_elementwise kernel takes.
bool Accepts(const KernelQuery& q, const DeviceRuntime& device, const OpDef* producer) {
  if (q.outputs.size() != 1) return false;
  const size_t n = static_cast<size_t>(q.attrs->GetInt(fusion::kProducerInputsAttr));
  if (n > q.inputs.size()) return false;
  const Attrs producer_attrs(fusion::ProducerAttrs(q.attrs->map()));
  const KernelQuery inner{*producer,         q.dtypes.first(n), &producer_attrs,
                          q.inputs.first(n), q.outputs,         q.device};
  const GpuKernelTable& table = GpuKernelTable::Get();
  if (table.Plan(inner, device) == nullptr) return false;
  absl::StatusOr<std::string> steps = ChainSteps(*q.attrs);
  if (!steps.ok()) return false;
  std::vector<TensorMeta> leaves = {q.outputs[0]};
  leaves.insert(leaves.end(), q.inputs.begin() + n, q.inputs.end());
  std::vector<DType> dtypes;
  for (const TensorMeta& m : leaves) dtypes.push_back(m.dtype);
  const Attrs chain_attrs(AttrMap{{fusion::kStepsAttr, *steps}});
  const KernelQuery post{ElementwiseDef(), dtypes, &chain_attrs, leaves, q.outputs, q.device};
  return table.Plan(post, device) != nullptr;
}

}  // namespace

void RegisterFusedProductKernels(GpuKernelTable& t) {
  for (const char* name : fusion::kProducers) {
    absl::StatusOr<const OpDef*> producer = OpRegistry::Builtin().Find(name);
    if (!producer.ok()) continue;
    GpuKernel k = KernelOf(RunFusedProduct, *producer);
    k.supports = [producer = *producer](const KernelQuery& q, const DeviceRuntime& device) {
      return Accepts(q, device, producer);
    };
    t.Add(fusion::FusedOpName(name), std::move(k));
  }
}

}  // namespace tensord::gpu
