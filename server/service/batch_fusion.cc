#include "server/service/batch_fusion.h"

#include <algorithm>
#include <iterator>
#include <utility>
#include <variant>

#include "server/ops/fusion.h"
#include "server/service/program_call_graph.h"

namespace tensord {
namespace {

using fusion::PostOp;

// Whether nobody but the batch names the outputs of `c`.
bool Absorbable(const CallSpec& c) { return c.discard && !c.fetch && !c.requires_grad; }

// Whether `operand` has its value before call `producer` runs.
bool ReadyAt(const OperandSpec& operand, size_t producer) {
  if (const auto* o = std::get_if<OperandSpec::CallOutput>(&operand.source)) {
    return o->call < producer;
  }
  return std::holds_alternative<OperandSpec::Handle>(operand.source) ||
         std::holds_alternative<OperandSpec::Literal>(operand.source);
}

bool IsProducer(const std::string& op) {
  return std::find_if(std::begin(fusion::kProducers), std::end(fusion::kProducers),
                      [&](const char* name) { return op == name; }) != std::end(fusion::kProducers);
}

}  // namespace

std::vector<BatchChain> FindBatchChains(const BatchSpec& batch, const Dispatcher& dispatcher) {
  const std::vector<CallSpec>& calls = batch.calls;
  if (std::none_of(calls.begin(), calls.end(),
                   [](const CallSpec& c) { return Absorbable(c) && IsProducer(c.op); })) {
    return {};  // most batches: nothing to look at further
  }
  // Per call: the calls reading its outputs (call, operand, output).
  struct Read {
    size_t call, operand, output;
  };
  std::vector<std::vector<Read>> reads(calls.size());
  for (size_t k = 0; k < calls.size(); ++k) {
    for (size_t i = 0; i < calls[k].inputs.size(); ++i) {
      const auto* o = std::get_if<OperandSpec::CallOutput>(&calls[k].inputs[i].source);
      if (o != nullptr && o->call < k) reads[o->call].push_back({k, i, o->output});
    }
  }
  // writers[k]: how many of the calls before k write tensors (in place or through an input).
  std::vector<size_t> writers(calls.size() + 1, 0);
  for (size_t k = 0; k < calls.size(); ++k) {
    writers[k + 1] = writers[k] + (Writes(dispatcher, calls[k]) ? 1 : 0);
  }
  std::vector<BatchChain> chains;
  for (size_t p = 0; p < calls.size(); ++p) {
    const CallSpec& producer = calls[p];
    if (!IsProducer(producer.op) || !Absorbable(producer)) continue;
    absl::StatusOr<const OpDef*> producer_def = dispatcher.registry().Find(producer.op);
    absl::StatusOr<const OpDef*> fused_def =
        dispatcher.registry().Find(fusion::FusedOpName(producer.op));
    if (!producer_def.ok() || !fused_def.ok()) continue;
    absl::StatusOr<Attrs> producer_attrs =
        ValidateAttrs(producer.op, (*producer_def)->attrs, producer.attrs);
    if (!producer_attrs.ok() || ((*producer_def)->composite_form_when &&
                                 (*producer_def)->composite_form_when(*producer_attrs))) {
      continue;  // a form other ops express (a convolution's padding='same')
    }
    std::vector<PostOp> posts;
    std::vector<size_t> absorbed;
    std::vector<OperandSpec> added;
    double alpha = 0;
    bool activation = false;
    for (size_t cur = p; Absorbable(calls[cur]) && reads[cur].size() == 1;) {
      const Read read = reads[cur][0];
      const CallSpec& c = calls[read.call];
      PostOp post;
      double a = 0;
      if (read.output != 0 || !fusion::PostOpOf(c.op, c.attrs, &post, &a)) break;
      if (fusion::IsActivation(post) && (activation || read.operand != 0 || c.inputs.size() != 1)) {
        break;
      }
      if (post == PostOp::kAdd &&
          (c.inputs.size() != 2 || !ReadyAt(c.inputs[1 - read.operand], p))) {
        break;
      }
      // The fused call reads every operand at the producer's place: nothing between may
      // write what the chain reads.
      if (writers[read.call] != writers[cur + 1]) break;
      if (post == PostOp::kAdd) added.push_back(c.inputs[1 - read.operand]);
      if (fusion::IsActivation(post)) alpha = a;
      activation |= fusion::IsActivation(post);
      posts.push_back(post);
      absorbed.push_back(read.call);
      cur = read.call;
    }
    if (!batch.no_grad) {
      const size_t keep = fusion::RecordableLength(posts);
      size_t adds = 0;
      for (size_t i = 0; i < keep; ++i) adds += posts[i] == PostOp::kAdd;
      posts.resize(keep);
      absorbed.resize(keep);
      added.resize(adds);
    }
    if (posts.empty()) continue;

    BatchChain chain;
    chain.producer = p;
    chain.absorbed = std::move(absorbed);
    const CallSpec& last = calls[chain.absorbed.back()];
    CallSpec& call = chain.fused;
    call.op = (*fused_def)->name;
    call.def = *fused_def;
    call.inputs = producer.inputs;
    for (OperandSpec& o : added) call.inputs.push_back(std::move(o));
    call.attrs = producer.attrs;
    call.attrs[fusion::kPostOpsAttr] = fusion::JoinPostOps(posts);
    call.attrs[fusion::kProducerInputsAttr] = static_cast<int64_t>(producer.inputs.size());
    call.attrs[fusion::kAlphaAttr] = alpha;
    call.requested_op = last.op;
    call.requires_grad = last.requires_grad;
    call.fetch = last.fetch;
    call.discard = last.discard;
    chains.push_back(std::move(chain));
    p = chains.back().absorbed.back();  // the chain's calls start no chain of their own
  }
  return chains;
}

}  // namespace tensord
