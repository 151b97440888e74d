#include "server/service/program_fusion.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "server/ops/fusion.h"
#include "server/service/program_call_graph.h"

namespace tensord {
namespace {

using fusion::PostOp;
using Use = CallUse;
struct Chain {
  std::vector<PostOp> posts;
  std::vector<size_t> calls;  // the post-op calls, in order
  std::vector<OperandSpec> operands;
  double alpha = 0;
};

// The post-op chain that follows the product at call `p`.
Chain FollowChain(const CallGraph& g, size_t p, const std::vector<std::vector<TensorMeta>>& metas,
                  const Dispatcher& dispatcher) {
  Chain chain;
  size_t cur = p;
  bool activation = false;
  while (!g.external[cur] && metas[cur].size() == 1) {
    const Use* only = g.OnlyUse(cur);
    if (only == nullptr) break;
    const Use use = *only;
    const CallSpec& c = *g.calls[use.call];
    PostOp post;
    double alpha = 0;
    if (!g.SameSection(p, use.call) || !c.requested_op.empty() ||
        !fusion::PostOpOf(c.op, c.attrs, &post, &alpha) || metas[use.call].size() != 1 ||
        metas[use.call][0].dtype != metas[cur][0].dtype ||
        metas[use.call][0].shape != metas[cur][0].shape) {
      break;
    }
    if (fusion::IsActivation(post) && (activation || use.operand != 0 || c.inputs.size() != 1)) {
      break;
    }
    const OperandSpec* other = nullptr;
    if (post == PostOp::kAdd) {
      if (c.inputs.size() != 2) break;
      other = &c.inputs[1 - use.operand];
      if (std::holds_alternative<OperandSpec::Scalar>(other->source) ||
          std::holds_alternative<std::monostate>(other->source)) {
        break;
      }
    }
    bool written = false;
    for (size_t k = cur + 1; k < use.call && !written; ++k) {
      written = Writes(dispatcher, *g.calls[k]);
    }
    if (written) break;
    if (other != nullptr) chain.operands.push_back(*other);
    activation |= fusion::IsActivation(post);
    if (fusion::IsActivation(post)) chain.alpha = alpha;
    chain.posts.push_back(post);
    chain.calls.push_back(use.call);
    cur = use.call;
  }
  return chain;
}

// Shortens a chain recorded for autodiff to what the fused op can differentiate: adds, then
// at most an activation of its output, last.
void TrimForAutodiff(Chain& chain) {
  const size_t keep = fusion::RecordableLength(chain.posts);
  size_t adds = 0;
  for (size_t i = 0; i < keep; ++i) adds += chain.posts[i] == PostOp::kAdd;
  chain.posts.resize(keep);
  chain.calls.resize(keep);
  chain.operands.resize(adds);
}

}  // namespace

int FuseProgramCalls(ProgramSpec& spec, const std::vector<std::vector<TensorMeta>>& metas,
                     const std::vector<ParameterType>& parameters, Session& session,
                     const Dispatcher& dispatcher) {
  CallGraph g(spec);
  if (metas.size() != g.calls.size()) return 0;
  const bool recording = spec.context_id != 0 && !spec.no_grad;
  int fused = 0;
  for (size_t p = 0; p < g.calls.size(); ++p) {
    CallSpec& producer = *g.calls[p];
    if (producer.folded_into >= 0 || !producer.requested_op.empty()) continue;
    if (std::find_if(std::begin(fusion::kProducers), std::end(fusion::kProducers),
                     [&](const char* name) { return producer.op == name; }) ==
        std::end(fusion::kProducers)) {
      continue;
    }
    absl::StatusOr<const OpDef*> producer_def = dispatcher.registry().Find(producer.op);
    absl::StatusOr<const OpDef*> fused_def =
        dispatcher.registry().Find(fusion::FusedOpName(producer.op));
    if (!producer_def.ok() || !fused_def.ok() || metas[p].size() != 1) continue;
    absl::StatusOr<Attrs> producer_attrs =
        ValidateAttrs(producer.op, (*producer_def)->attrs, producer.attrs);
    if (!producer_attrs.ok() || ((*producer_def)->composite_form_when &&
                                 (*producer_def)->composite_form_when(*producer_attrs))) {
      continue;  // a form other ops express (a convolution's padding='same')
    }
    Chain chain = FollowChain(g, p, metas, dispatcher);
    if (recording && p < g.n_forward) TrimForAutodiff(chain);
    if (chain.posts.empty()) continue;

    CallSpec call;
    call.op = (*fused_def)->name;
    call.def = *fused_def;
    call.inputs = producer.inputs;
    for (const OperandSpec& o : chain.operands) call.inputs.push_back(o);
    call.attrs = producer.attrs;
    call.attrs[fusion::kPostOpsAttr] = fusion::JoinPostOps(chain.posts);
    call.attrs[fusion::kProducerInputsAttr] = static_cast<int64_t>(producer.inputs.size());
    call.attrs[fusion::kAlphaAttr] = chain.alpha;
    // Fused only where the device has a kernel for these shapes.
    const size_t last = chain.calls.back();
    const std::string& device = metas[last][0].device;
    std::vector<TensorMeta> in;
    std::vector<DType> dtypes;
    for (const OperandSpec& o : call.inputs) {
      std::optional<TensorMeta> meta = OperandMeta(o, metas, parameters, session, device);
      if (!meta) break;
      dtypes.push_back(meta->dtype);
      in.push_back(*std::move(meta));
    }
    absl::StatusOr<Attrs> attrs = ValidateAttrs(call.op, (*fused_def)->attrs, call.attrs);
    absl::StatusOr<Backend*> backend = dispatcher.BackendFor(device);
    if (in.size() != call.inputs.size() || !attrs.ok() || !backend.ok() ||
        !(*backend)->Plan({**fused_def, dtypes, &*attrs, in, metas[last], device}).ok()) {
      continue;
    }
    CallSpec& target = *g.calls[last];
    call.requested_op = target.op;
    call.requires_grad = target.requires_grad;
    call.fetch = target.fetch;
    call.keep = target.keep;
    target = std::move(call);
    producer.folded_into = static_cast<int64_t>(last);
    for (size_t i = 0; i + 1 < chain.calls.size(); ++i) {
      g.calls[chain.calls[i]]->folded_into = static_cast<int64_t>(last);
    }
    ++fused;
  }
  return fused + FuseElementwiseCalls(spec, metas, parameters, session, dispatcher);
}

}  // namespace tensord
