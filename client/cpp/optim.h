// Optimizers whose step runs on the server, like torch::optim's SGD, Adam and AdamW:
//
//   Adam opt(params);  // AdamOptions: lr 1e-3, betas (0.9, 0.999), as torch::optim
//   ASSIGN_OR_RETURN(Gradients g, ctx.Backward({loss}));
//   RETURN_IF_ERROR(opt.Step(g));
//
// Each Step is one no_grad batch holding one fused update op per parameter (the server's sgd,
// adam and adamw ops), so parameters and optimizer state never leave the server. The state
// (momentum buffers, moment estimates, step counts) is made of tensors of the session, on each
// parameter's device, created at the parameter's first step. A step is atomic: when it fails,
// no parameter and no state tensor has changed. Options may be changed between steps
// (a learning-rate schedule), through options().
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/cpp/session.h"
#include "client/cpp/tensor.h"

namespace tensord::client {

struct SgdOptions {
  double lr = 0;  // required, as in torch::optim::SGDOptions(lr)
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;  // Adam: L2 added to the gradient; AdamW: decoupled (default 1e-2)
  bool amsgrad = false;
  bool maximize = false;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Updates every parameter that has a gradient in `grads`; the others are left alone.
  absl::Status Step(const Gradients& grads);
  // The same step as updates of a program, one per parameter among the leaves of its
  // backward (state is created now for parameters that have none).
  absl::Status AddStepTo(ProgramBuilder& program);
  const std::vector<Tensor>& params() const { return params_; }
  // The state tensors of `param` in the op's input order (empty before its first step).
  std::vector<Tensor> state(const Tensor& param) const;

 protected:
  Optimizer(std::string op, std::vector<Tensor> params)
      : op_(std::move(op)), params_(std::move(params)) {}
  const std::string& op() const { return op_; }
  // The op's attributes and the names of the state inputs it takes after param and grad
  // ("step" is a 0-d f32 counter, the others zeros of the param's shape).
  virtual Attrs OpAttrs() const = 0;
  virtual std::vector<std::string> StateNames() const = 0;
  // Refusals of the options (BAD_ATTRIBUTE, as the server answers them, origin=client).
  virtual absl::Status CheckOptions() const = 0;

 private:
  absl::Status InitState(const std::vector<Tensor>& params);
  std::string op_;
  std::vector<Tensor> params_;
  std::map<uint64_t, std::vector<Tensor>> state_;  // by param handle
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<Tensor> params, SgdOptions options)
      : Optimizer("sgd", std::move(params)), options_(options) {}
  SgdOptions& options() { return options_; }

 protected:
  Attrs OpAttrs() const override;
  std::vector<std::string> StateNames() const override;
  absl::Status CheckOptions() const override;

 private:
  SgdOptions options_;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions options = {})
      : Adam("adam", std::move(params), options) {}
  AdamOptions& options() { return options_; }

 protected:
  Adam(std::string op, std::vector<Tensor> params, AdamOptions options)
      : Optimizer(std::move(op), std::move(params)), options_(options) {}
  Attrs OpAttrs() const override;
  std::vector<std::string> StateNames() const override;
  absl::Status CheckOptions() const override;

 private:
  AdamOptions options_;
};

// AdamW's options: AdamOptions with torch's AdamW default weight decay.
inline AdamOptions AdamWDefaults() {
  AdamOptions o;
  o.weight_decay = 1e-2;
  return o;
}

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions options = AdamWDefaults())
      : Adam("adamw", std::move(params), options) {}
};

}  // namespace tensord::client
