// Programs: a training (or inference) step compiled on the server once and then run in one
// round trip -- forward, backward and optimizer updates -- with the batch's atomicity.
//
//   ProgramBuilder b = session.NewProgram(ctx.id());
//   Operand x = b.Parameter(HostTensor(example_x), "x");
//   CallRef loss = b.Add("mse_loss", {b.Add("matmul", {x, w}), y}, {}, {.fetch = true});
//   b.Backward({loss.out(0)}, {w});
//   b.Update("sgd", {w, Operand::GradientOf(w.handle())}, {{"lr", 0.1}});
//   // or: RETURN_IF_ERROR(optimizer.AddStepTo(b));
//   ASSIGN_OR_RETURN(Program step, b.Compile());
//   ASSIGN_OR_RETURN(ProgramResult r, step.Run({HostTensor(batch_x)}));
//   double l = r.value(loss).scalar<float>();
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cpp/host_tensor.h"
#include "client/cpp/session.h"
#include "client/cpp/tensor.h"
#include "tensord/v1/service.pb.h"

namespace tensord::client {

class Optimizer;

// What one run returned: outputs of `keep` calls (tensors of the session), values of `fetch`
// calls, and the gradients when the backward fetches them (in the order of its leaves).
class ProgramResult {
 public:
  const std::vector<Tensor>& outputs(CallRef call) const { return outputs_.at(call.index()); }
  const Tensor& output(CallRef call, size_t k = 0) const { return outputs_.at(call.index()).at(k); }
  const HostTensor& value(CallRef call, size_t k = 0) const {
    return values_.at(call.index()).at(k);
  }
  const std::vector<HostTensor>& gradients() const { return gradients_; }

 private:
  friend class Program;
  std::vector<std::vector<Tensor>> outputs_;
  std::vector<std::vector<HostTensor>> values_;
  std::vector<HostTensor> gradients_;
};

// A compiled program of a session. Copies share it; Release frees it on the server (closing
// the session frees it too). Every run names the tensors the builder was given (parameter
// examples, operands, backward leaves) by handle, so the program holds them until its last
// copy goes.
class Program {
 public:
  uint64_t id() const { return id_; }
  // Compiled dtype and shape of call `call`'s outputs (forward calls, then updates).
  const std::vector<TensorInfo>& compiled(CallRef call) const { return compiled_.at(call.index()); }
  // The fused op the server computes call `call` in (a product with the bias, activation or
  // residual add after it: fused_linear, ...; a tree of pointwise calls: fused_elementwise),
  // or "" when the call runs as written; and how many fused calls the program runs (none on a
  // server started with --fusion=off).
  const std::string& fused_op(CallRef call) const { return fused_ops_.at(call.index()); }
  int fused_calls() const { return fused_calls_; }
  // The most bytes the server's trial run of the program held above what the session held
  // before it (sampled after each call and after the backward): what a run needs of the quota.
  int64_t peak_bytes() const { return peak_bytes_; }
  // One operand per parameter (a tensor, a literal or a number of its example's kind).
  absl::StatusOr<ProgramResult> Run(const std::vector<Operand>& inputs) const;
  absl::Status Release() const;

 private:
  friend class ProgramBuilder;
  std::shared_ptr<internal::SessionState> state_;
  uint64_t id_ = 0;
  std::vector<std::vector<TensorInfo>> compiled_;
  std::vector<std::string> fused_ops_;
  int fused_calls_ = 0;
  int64_t peak_bytes_ = 0;
  std::shared_ptr<const std::vector<Tensor>> keep_alive_;  // the tensors it names
};

// Builds a CompileProgramRequest: parameters, forward calls, then (once Backward or Update is
// called) the backward and the updates, numbered after the forward calls.
class ProgramBuilder {
 public:
  // Parameter `name`, bound at every run; `example` fixes its kind, dtype and shape and is
  // what the compile-time run uses.
  Operand Parameter(Operand example, const std::string& name = "");
  CallRef Add(const std::string& op, std::vector<Operand> inputs, const Attrs& attrs = {},
              const ProgramCallOptions& options = {});
  // Differentiates the roots (one-element forward outputs) with respect to `leaves`
  // (requires-grad leaves of the program's context).
  void Backward(const std::vector<CallOutput>& roots, const std::vector<Tensor>& leaves,
                bool fetch_gradients = false);
  // Has the backward reduce these gradients across the session's process group while it runs
  // (GradientReduction, session.h); every bucket leaf must be one of Backward's leaves. The
  // updates and fetched gradients then see the reduced values.
  void Reduce(const GradientReduction& reduce);
  // An update call (no recording, after the backward); Operand::GradientOf(leaf) takes a
  // gradient of the backward.
  CallRef Update(const std::string& op, std::vector<Operand> inputs, const Attrs& attrs = {},
                 const ProgramCallOptions& options = {});
  // Sends CompileProgram: the server runs the program once on the examples and undoes it.
  absl::StatusOr<Program> Compile();

 private:
  friend class Session;
  friend class Optimizer;
  ProgramBuilder(std::shared_ptr<internal::SessionState> state, uint64_t context, bool no_grad);
  CallRef AddTo(::tensord::v1::OpCall* call, const std::string& op,
                const std::vector<Operand>& inputs, const Attrs& attrs,
                const ProgramCallOptions& options, int index);
  std::shared_ptr<internal::SessionState> state_;
  ::tensord::v1::CompileProgramRequest request_;
  std::vector<Tensor> leaves_;
  std::vector<Tensor> keep_alive_;
  absl::Status error_;
};

}  // namespace tensord::client
