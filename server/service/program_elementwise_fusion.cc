// The second fusion pass (program_fusion.h): trees of pointwise calls become fused_elementwise
// calls (server/ops/elementwise_fusion.h).
//
// A call is a candidate when it is a pointwise op the expression language has, of one float
// dtype (its tensor operands and its output; numbers are welcome), with a backward rule of its
// own where the forward records for autodiff, and the device plans it as a one-step expression (the
// CPU does so only where the step computes what the call's own kernel computes). A candidate
// absorbs a candidate operand call when that call's output is read by it alone and leaves the
// program nowhere, no call in between writes a tensor, and the expression stays within its limits.
// Each tree of two calls or more then runs as one call at its root, its other calls folded into it.
#include <algorithm>
#include <optional>

#include "server/ops/elementwise_fusion.h"
#include "server/service/program_call_graph.h"
#include "server/service/program_fusion.h"

namespace tensord {
namespace {

using fusion::Step;

constexpr size_t kMaxCalls = 64;   // per expression
constexpr size_t kMaxLeaves = 32;  // inputs of one fused call

struct Node {
  bool candidate = false;
  Step step;
  DType dtype = DType::kF32;
  std::vector<std::optional<size_t>> children;  // per operand: the absorbed call, if any
  size_t calls = 1;                             // calls in the tree rooted here
  size_t first = 0;                             // the earliest call of that tree
  int depth = 1;                                // the most stack values it holds
  int root = -1;                                // the call it was folded into, if any
};

// Same value bound: the same call output, parameter, handle, gradient or number.
bool SameSource(const OperandSpec& a, const OperandSpec& b) {
  if (a.source.index() != b.source.index()) return false;
  if (const auto* x = std::get_if<OperandSpec::CallOutput>(&a.source)) {
    const auto& y = std::get<OperandSpec::CallOutput>(b.source);
    return x->call == y.call && x->output == y.output;
  }
  if (const auto* x = std::get_if<OperandSpec::Parameter>(&a.source)) {
    return x->index == std::get<OperandSpec::Parameter>(b.source).index;
  }
  if (const auto* x = std::get_if<OperandSpec::Handle>(&a.source)) {
    return x->handle == std::get<OperandSpec::Handle>(b.source).handle;
  }
  if (const auto* x = std::get_if<OperandSpec::Gradient>(&a.source)) {
    return x->leaf == std::get<OperandSpec::Gradient>(b.source).leaf;
  }
  if (const auto* x = std::get_if<OperandSpec::Scalar>(&a.source)) {
    return *x == std::get<OperandSpec::Scalar>(b.source);
  }
  return false;  // literals are never shared
}

class ElementwiseFusion {
 public:
  ElementwiseFusion(ProgramSpec& spec, const std::vector<std::vector<TensorMeta>>& metas,
                    const std::vector<ParameterType>& parameters, Session& session,
                    const Dispatcher& dispatcher)
      : g_(spec),
        metas_(metas),
        parameters_(parameters),
        session_(session),
        dispatcher_(dispatcher),
        recording_(spec.context_id != 0 && !spec.no_grad),
        nodes_(g_.calls.size()) {}

  int Run() {
    absl::StatusOr<const OpDef*> def = dispatcher_.registry().Find(fusion::kElementwiseOp);
    if (!def.ok() || metas_.size() != g_.calls.size()) return 0;
    fused_def_ = *def;
    for (size_t k = 0; k < g_.calls.size(); ++k) {
      nodes_[k].candidate = Candidate(k);
      if (nodes_[k].candidate) Absorb(k);
    }
    int fused = 0;
    for (size_t k = 0; k < g_.calls.size(); ++k) {
      if (nodes_[k].candidate && nodes_[k].root < 0 && nodes_[k].calls > 1) fused += Fuse(k);
    }
    return fused;
  }

 private:
  // The operand's type as the call sees it: a number takes the call's dtype.
  std::optional<TensorMeta> Meta(const OperandSpec& o, DType dtype, const std::string& device) {
    if (std::holds_alternative<OperandSpec::Scalar>(o.source)) {
      return TensorMeta{dtype, {}, true, kHostDevice};
    }
    return OperandMeta(o, metas_, parameters_, session_, device);
  }

  bool Plans(const std::vector<OperandSpec>& inputs, const std::vector<Step>& steps,
             const TensorMeta& out) {
    std::vector<TensorMeta> in;
    std::vector<DType> dtypes;
    for (const OperandSpec& o : inputs) {
      std::optional<TensorMeta> m = Meta(o, out.dtype, out.device);
      if (!m) return false;
      dtypes.push_back(m->dtype);
      in.push_back(*std::move(m));
    }
    absl::StatusOr<Attrs> attrs = ValidateAttrs(fused_def_->name, fused_def_->attrs,
                                                {{fusion::kStepsAttr, fusion::FormatSteps(steps)}});
    absl::StatusOr<Backend*> backend = dispatcher_.BackendFor(out.device);
    return attrs.ok() && backend.ok() &&
           (*backend)->Plan({*fused_def_, dtypes, &*attrs, in, {&out, 1}, out.device}).ok();
  }

  bool Candidate(size_t k) {
    const CallSpec& c = *g_.calls[k];
    if (c.folded_into >= 0 || !c.requested_op.empty() || metas_[k].size() != 1) return false;
    const TensorMeta& out = metas_[k][0];
    if (!kFloat.Contains(out.dtype) || c.def == nullptr || Writes(dispatcher_, c)) return false;
    // A recorded call's step must differentiate by its op's own rule, which the fused call's
    // rule runs (elementwise_fusion.h).
    if (recording_ && k < g_.n_forward &&
        (c.def->marking != Marking::kDifferentiable || !c.def->backward)) {
      return false;
    }
    absl::StatusOr<Attrs> attrs = ValidateAttrs(c.op, c.def->attrs, c.attrs);
    Node& n = nodes_[k];
    if (!attrs.ok() || !fusion::StepOf(c.op, *attrs, &n.step) ||
        c.inputs.size() != static_cast<size_t>(fusion::Arity(n.step.fn))) {
      return false;
    }
    std::vector<Step> steps;
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const bool number = std::holds_alternative<OperandSpec::Scalar>(c.inputs[i].source);
      std::optional<TensorMeta> m = Meta(c.inputs[i], out.dtype, out.device);
      if (!m || (!number && m->dtype != out.dtype)) return false;
      steps.push_back(Step{true, static_cast<int>(i)});
    }
    steps.push_back(n.step);
    n.dtype = out.dtype;
    n.children.assign(c.inputs.size(), std::nullopt);
    n.first = k;
    n.depth = static_cast<int>(c.inputs.size());  // leaves pushed one after the other
    return Plans(c.inputs, steps, out);
  }

  // Takes in the candidate calls whose outputs only call `k` reads.
  void Absorb(size_t k) {
    Node& n = nodes_[k];
    const CallSpec& c = *g_.calls[k];
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      const auto* o = std::get_if<OperandSpec::CallOutput>(&c.inputs[i].source);
      if (o == nullptr || o->output != 0 || o->call >= k) continue;
      const size_t j = o->call;
      Node& child = nodes_[j];
      const CallUse* use = g_.OnlyUse(j);
      if (!child.candidate || child.root >= 0 || g_.external[j] || !g_.SameSection(j, k) ||
          use == nullptr || use->call != k || child.dtype != n.dtype ||
          n.calls + child.calls > kMaxCalls) {
        continue;
      }
      // Operands are pushed in order: this one's values sit above the ones before it.
      int depth = 1;
      for (size_t m = 0; m < c.inputs.size(); ++m) {
        const int need = m == i ? child.depth : n.children[m] ? nodes_[*n.children[m]].depth : 1;
        depth = std::max(depth, need + static_cast<int>(m));
      }
      bool written = false;
      for (size_t w = std::min(child.first, n.first) + 1; w < k && !written; ++w) {
        written = Writes(dispatcher_, *g_.calls[w]);
      }
      if (depth > fusion::kMaxStackDepth || written) continue;
      n.children[i] = j;
      n.calls += child.calls;
      n.first = std::min(n.first, child.first);
      n.depth = depth;
      child.root = static_cast<int>(k);
    }
  }

  // Appends the postfix form of the tree rooted at `k`, its leaves to `leaves`.
  void Emit(size_t k, std::vector<Step>& steps, std::vector<OperandSpec>& leaves,
            std::vector<size_t>& members) {
    members.push_back(k);
    const CallSpec& c = *g_.calls[k];
    for (size_t i = 0; i < c.inputs.size(); ++i) {
      if (nodes_[k].children[i]) {
        Emit(*nodes_[k].children[i], steps, leaves, members);
        continue;
      }
      auto same = std::find_if(leaves.begin(), leaves.end(),
                               [&](const OperandSpec& l) { return SameSource(l, c.inputs[i]); });
      if (same == leaves.end()) same = leaves.insert(leaves.end(), c.inputs[i]);
      steps.push_back(Step{true, static_cast<int>(same - leaves.begin())});
    }
    steps.push_back(nodes_[k].step);
  }

  int Fuse(size_t root) {
    std::vector<Step> steps;
    std::vector<OperandSpec> leaves;
    std::vector<size_t> members;
    Emit(root, steps, leaves, members);
    if (leaves.size() > kMaxLeaves || !Plans(leaves, steps, metas_[root][0])) return 0;
    CallSpec& target = *g_.calls[root];
    CallSpec call;
    call.op = fused_def_->name;
    call.def = fused_def_;
    call.inputs = std::move(leaves);
    call.attrs[fusion::kStepsAttr] = fusion::FormatSteps(steps);
    call.requested_op = target.op;
    call.requires_grad = target.requires_grad;
    call.fetch = target.fetch;
    call.keep = target.keep;
    target = std::move(call);
    for (size_t m : members) {
      if (m != root) g_.calls[m]->folded_into = static_cast<int64_t>(root);
    }
    return 1;
  }

  CallGraph g_;
  const std::vector<std::vector<TensorMeta>>& metas_;
  const std::vector<ParameterType>& parameters_;
  Session& session_;
  const Dispatcher& dispatcher_;
  const bool recording_;
  std::vector<Node> nodes_;
  const OpDef* fused_def_ = nullptr;
};

}  // namespace

int FuseElementwiseCalls(ProgramSpec& spec, const std::vector<std::vector<TensorMeta>>& metas,
                         const std::vector<ParameterType>& parameters, Session& session,
                         const Dispatcher& dispatcher) {
  return ElementwiseFusion(spec, metas, parameters, session, dispatcher).Run();
}

}  // namespace tensord
