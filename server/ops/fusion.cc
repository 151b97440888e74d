// The fused products of fusion.h: their table entries (shape rule, backward rule) copied from
// the producer's, and the post-op vocabulary the program compiler and the kernels share.
#include "server/ops/fusion.h"

#include <map>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/core/status.h"
#include "server/ops/op_helpers.h"
#include "server/ops/registry.h"

namespace tensord::fusion {
namespace {

struct PostOpEntry {
  PostOp post;
  const char* name;  // in post_ops
  const char* op;    // the pointwise op it stands for
};
constexpr PostOpEntry kPostOps[] = {
    {PostOp::kAdd, "add", "add"},
    {PostOp::kRelu, "relu", "relu"},
    {PostOp::kSigmoid, "sigmoid", "sigmoid"},
    {PostOp::kTanh, "tanh", "tanh"},
    {PostOp::kGelu, "gelu", "gelu"},
    {PostOp::kGeluTanh, "gelu_tanh", "gelu"},
    {PostOp::kSilu, "silu", "silu"},
    {PostOp::kLeakyRelu, "leaky_relu", "leaky_relu"},
    {PostOp::kElu, "elu", "elu"},
};

const PostOpEntry& Entry(PostOp p) { return kPostOps[static_cast<int>(p)]; }

// A float attribute as given (ints widen), or `fallback` when absent.
bool NumberAttr(const AttrMap& attrs, const std::string& name, double fallback, double* out) {
  auto it = attrs.find(name);
  if (it == attrs.end()) {
    *out = fallback;
    return true;
  }
  if (const double* d = std::get_if<double>(&it->second))
    *out = *d;
  else if (const int64_t* i = std::get_if<int64_t>(&it->second))
    *out = static_cast<double>(*i);
  else
    return false;
  return true;
}

bool OnlyAttrs(const AttrMap& attrs, std::initializer_list<const char*> names) {
  for (const auto& [name, value] : attrs) {
    bool known = false;
    for (const char* n : names) known = known || name == n;
    if (!known) return false;
  }
  return true;
}

}  // namespace

std::string FusedOpName(const std::string& producer) { return "fused_" + producer; }

bool PostOpOf(const std::string& op, const AttrMap& attrs, PostOp* post, double* alpha) {
  *alpha = 0;
  if (op == "add") {
    double a = 1;
    if (!OnlyAttrs(attrs, {"alpha"}) || !NumberAttr(attrs, "alpha", 1.0, &a) || a != 1.0) {
      return false;
    }
    *post = PostOp::kAdd;
    return true;
  }
  if (op == "gelu") {
    if (!OnlyAttrs(attrs, {"approximate"})) return false;
    auto it = attrs.find("approximate");
    const std::string* form = it == attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (it != attrs.end() && form == nullptr) return false;
    *post = form != nullptr && *form == "tanh" ? PostOp::kGeluTanh : PostOp::kGelu;
    return form == nullptr || *form == "tanh" || *form == "none";
  }
  if (op == "leaky_relu") {
    *post = PostOp::kLeakyRelu;
    return OnlyAttrs(attrs, {"negative_slope"}) && NumberAttr(attrs, "negative_slope", 0.01, alpha);
  }
  if (op == "elu") {
    *post = PostOp::kElu;
    return OnlyAttrs(attrs, {"alpha"}) && NumberAttr(attrs, "alpha", 1.0, alpha);
  }
  for (const PostOpEntry& e : kPostOps) {
    if (op == e.name && e.post != PostOp::kAdd && attrs.empty()) {
      *post = e.post;
      return true;
    }
  }
  return false;
}

bool IsActivation(PostOp p) { return p != PostOp::kAdd; }

bool DifferentiatesFromOutput(PostOp p) {
  return p == PostOp::kRelu || p == PostOp::kSigmoid || p == PostOp::kTanh;
}

size_t RecordableLength(const std::vector<PostOp>& chain) {
  for (size_t i = 0; i < chain.size(); ++i) {
    if (IsActivation(chain[i])) return DifferentiatesFromOutput(chain[i]) ? i + 1 : i;
  }
  return chain.size();
}

const char* PostOpOpName(PostOp p) { return Entry(p).op; }
const char* PostOpName(PostOp p) { return Entry(p).name; }

std::string JoinPostOps(const std::vector<PostOp>& chain) {
  return absl::StrJoin(chain, ",", [](std::string* out, PostOp p) { out->append(PostOpName(p)); });
}

absl::StatusOr<std::vector<PostOp>> ParsePostOps(const std::string& text) {
  std::vector<PostOp> chain;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    bool found = false;
    for (const PostOpEntry& e : kPostOps) {
      if (part == e.name) {
        chain.push_back(e.post);
        found = true;
      }
    }
    if (!found) {
      return Error(Reason::kBadAttribute, absl::StrCat("fused op: unknown post-op '", part, "'"),
                   {{"attr", kPostOpsAttr}});
    }
  }
  if (chain.empty()) {
    return Error(Reason::kBadAttribute, "fused op: post_ops names no post-op",
                 {{"attr", kPostOpsAttr}});
  }
  return chain;
}

AttrMap ProducerAttrs(const AttrMap& fused) {
  AttrMap out = fused;
  for (const char* name : {kPostOpsAttr, kProducerInputsAttr, kAlphaAttr}) out.erase(name);
  return out;
}

namespace {

using namespace ops;

// The fused op of `producer`: its inputs, attributes and shape rule, then the chain's.
OpDef FusedDef(const OpDef& producer) {
  OpDef d = producer;
  d.name = FusedOpName(producer.name);
  d.id = kNotBuiltin;
  d.internal = true;
  d.marking = Marking::kDifferentiable;
  d.max_inputs = kVariadic;
  d.dtypes = DTypeSet::Of(DType::kF32);  // the dtype the fused kernels compute in
  d.widen_storage_dtypes = false;
  d.composite = nullptr;
  d.composite_form = nullptr;
  d.composite_form_when = nullptr;
  d.input_names.push_back("post_operands");
  d.attrs.push_back(StringAttr(kPostOpsAttr, ""));
  d.attrs.push_back(IntAttr(kProducerInputsAttr, producer.min_inputs));
  d.attrs.push_back(FloatAttr(kAlphaAttr, 0.0));
  d.doc = absl::StrCat(producer.name,
                       " followed by pointwise post-ops, computed as one (formed "
                       "by programs; not callable)");
  const std::string name = d.name;
  d.infer = [name, infer = producer.infer](
                absl::Span<const TensorMeta> in,
                const Attrs& attrs) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(std::vector<PostOp> chain, ParsePostOps(attrs.GetString(kPostOpsAttr)));
    const int64_t n = attrs.GetInt(kProducerInputsAttr);
    int64_t adds = 0;
    for (PostOp p : chain) adds += p == PostOp::kAdd;
    if (n < 1 || n + adds != static_cast<int64_t>(in.size())) {
      return AttrError(name, kProducerInputsAttr,
                       absl::StrCat(n, " producer inputs and ", adds,
                                    " added operands do not make ", in.size(), " inputs"));
    }
    ASSIGN_OR_RETURN(std::vector<TensorMeta> out, infer(in.first(n), attrs));
    for (size_t i = n; i < in.size(); ++i) {
      auto b = BroadcastShapes(out[0].shape, in[i].shape);
      if (in[i].dtype != out[0].dtype || !b.ok() || *b != out[0].shape) {
        return ShapeError(
            name, absl::StrCat("added operand ", i - n, " of shape ", ShapeToString(in[i].shape),
                               " and dtype ", DTypeName(in[i].dtype), " does not fit the output"));
      }
    }
    return out;
  };
  d.backward = [name, backward = producer.backward](
                   const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    ASSIGN_OR_RETURN(std::vector<PostOp> chain, ParsePostOps(g.attrs.GetString(kPostOpsAttr)));
    const size_t n = static_cast<size_t>(g.attrs.GetInt(kProducerInputsAttr));
    std::vector<Tensor> grads(g.inputs.size());
    Tensor grad = g.grad_outputs[0];
    size_t operand = g.inputs.size();
    for (size_t i = chain.size(); i-- > 0;) {
      if (chain[i] == PostOp::kAdd) {
        // The engine sums it over the operand's broadcast dims.
        if (g.needs_input_grad[--operand]) grads[operand] = grad;
        continue;
      }
      if (i + 1 != chain.size() || !DifferentiatesFromOutput(chain[i])) {
        return Error(Reason::kInternal,
                     absl::StrCat(name, ": post-ops '", g.attrs.GetString(kPostOpsAttr),
                                  "' were recorded, but their gradient needs values the fused "
                                  "op does not keep"),
                     {{"op", name}});
      }
      ASSIGN_OR_RETURN(grad, g.run.Run1(absl::StrCat(PostOpOpName(chain[i]), "_backward"),
                                        {grad, g.outputs[0]}));
    }
    const Attrs producer_attrs(ProducerAttrs(g.attrs.map()));
    const Tensor grad_output[] = {grad};
    GradContext inner{g.inputs.first(n),
                      g.outputs,
                      grad_output,
                      producer_attrs,
                      std::vector<bool>(g.needs_input_grad.begin(), g.needs_input_grad.begin() + n),
                      g.run};
    ASSIGN_OR_RETURN(std::vector<Tensor> producer_grads, backward(inner));
    for (size_t i = 0; i < n && i < producer_grads.size(); ++i) grads[i] = producer_grads[i];
    return grads;
  };
  return d;
}

}  // namespace

void RegisterFusionOps(OpRegistry& r) {
  for (const char* producer : kProducers) {
    absl::StatusOr<const OpDef*> def = r.Find(producer);
    if (!def.ok()) continue;  // a registry without the producer (tests) has no fused form
    MustAdd(r, FusedDef(**def));
  }
}

}  // namespace tensord::fusion
