// Fused products: a matrix product or convolution followed by a chain of pointwise post-ops
// (adds of a bias or a residual, one activation), computed by one kernel. Programs form them
// when they are compiled (server/service/program_fusion.cc); a backend runs one as a single
// primitive where it can (oneDNN's post-ops on the CPU). They are internal ops: clients never
// name them, and a program reports which of its calls were fused.
//
// A fused op `fused_<producer>` takes the producer's inputs, then one operand per `add` of its
// chain. Its attributes are the producer's, plus:
//   post_ops         the chain, comma-separated: "add", "relu", "add,relu,add", ...
//   producer_inputs  how many of the inputs are the producer's (a bias is optional)
//   post_alpha       leaky_relu's negative_slope or elu's alpha, when the chain has one
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/ops/attrs.h"

namespace tensord {
class OpRegistry;
}  // namespace tensord

namespace tensord::fusion {

enum class PostOp { kAdd, kRelu, kSigmoid, kTanh, kGelu, kGeluTanh, kSilu, kLeakyRelu, kElu };

inline constexpr const char* kPostOpsAttr = "post_ops";
inline constexpr const char* kProducerInputsAttr = "producer_inputs";
inline constexpr const char* kAlphaAttr = "post_alpha";

// The ops a fused op can start with.
inline constexpr const char* kProducers[] = {"linear", "matmul", "conv2d", "conv3d"};
// "fused_" + producer.
std::string FusedOpName(const std::string& producer);

// The post-op of a call of `op` with (unvalidated) attributes `attrs`, and the alpha it needs
// (0 when none); nullopt-like false when the call cannot be a post-op (another op, an add with
// an alpha other than 1).
bool PostOpOf(const std::string& op, const AttrMap& attrs, PostOp* post, double* alpha);
bool IsActivation(PostOp p);
// relu, sigmoid and tanh differentiate from their output: a fused op ending in one can be
// recorded for autodiff without keeping the pre-activation value.
bool DifferentiatesFromOutput(PostOp p);
// How much of `chain` a fused op recorded for autodiff can take: up to its first activation,
// which it includes when the activation differentiates from its output.
size_t RecordableLength(const std::vector<PostOp>& chain);
// The pointwise op a post-op stands for ("add", "relu", "gelu" for both gelus, ...).
const char* PostOpOpName(PostOp p);
const char* PostOpName(PostOp p);  // as written in post_ops ("gelu_tanh" for gelu's tanh form)
std::string JoinPostOps(const std::vector<PostOp>& chain);
absl::StatusOr<std::vector<PostOp>> ParsePostOps(const std::string& text);

// The producer's attributes among a fused call's.
AttrMap ProducerAttrs(const AttrMap& fused);

// Registers fused_<producer> for each producer `r` holds (after the producers).
void RegisterFusionOps(OpRegistry& r);

}  // namespace tensord::fusion
