#include "client/cpp/optim.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cpp/internal.h"
#include "client/cpp/program.h"

namespace tensord::client {
namespace {

absl::Status BadOption(const std::string& op, const std::string& name, double value,
                       const std::string& rule) {
  return internal::ServerAnswer(
      ::tensord::v1::BAD_ATTRIBUTE,
      absl::StrCat("client: ", op, ": attribute '", name, "' is ", value, "; ", rule),
      {{"op", op}, {"attribute", name}});
}

// NaN fails the test, as torch.optim's `if not 0.0 <= lr` does.
absl::Status AtLeastZero(const std::string& op, const std::string& name, double value) {
  if (value >= 0) return absl::OkStatus();
  return BadOption(op, name, value, "it must be >= 0");
}

}  // namespace

std::vector<Tensor> Optimizer::state(const Tensor& param) const {
  auto it = state_.find(param.handle());
  return it == state_.end() ? std::vector<Tensor>{} : it->second;
}

absl::Status Optimizer::InitState(const std::vector<Tensor>& params) {
  // One batch for every parameter without state; zeros, as torch.optim starts from.
  const std::vector<std::string> names = StateNames();
  Batch batch(params.front().session_state(), BatchOptions{/*no_grad=*/true});
  std::vector<std::vector<CallRef>> calls;
  for (const Tensor& p : params) {
    std::vector<CallRef>& refs = calls.emplace_back();
    for (const std::string& name : names) {
      if (name == "step") {
        refs.push_back(batch.Add(
            "zeros", {},
            {{"shape", std::vector<int64_t>{}}, {"dtype", DType::kF32}, {"device", p.device()}}));
      } else {
        refs.push_back(batch.Add("zeros_like", {p}));
      }
    }
  }
  absl::StatusOr<BatchResult> done = batch.Run();
  if (!done.ok()) return done.status();
  for (size_t i = 0; i < params.size(); ++i) {
    std::vector<Tensor>& tensors = state_[params[i].handle()];
    for (const CallRef& ref : calls[i]) tensors.push_back(done->output(ref));
  }
  return absl::OkStatus();
}

absl::Status Optimizer::Step(const Gradients& grads) {
  if (absl::Status st = CheckOptions(); !st.ok()) return st;
  std::vector<Tensor> todo, fresh;
  for (const Tensor& p : params_) {
    if (!grads.contains(p)) continue;
    todo.push_back(p);
    if (!state_.count(p.handle())) fresh.push_back(p);
  }
  if (todo.empty()) return absl::OkStatus();
  const std::vector<std::string> names = StateNames();
  if (!names.empty() && !fresh.empty()) {
    if (absl::Status st = InitState(fresh); !st.ok()) return st;
  }
  const Attrs attrs = OpAttrs();
  Batch batch(todo.front().session_state(), BatchOptions{/*no_grad=*/true});
  for (const Tensor& p : todo) {
    std::vector<Operand> inputs = {p, grads.grad(p)};
    if (!names.empty()) {
      for (const Tensor& s : state_.at(p.handle())) inputs.push_back(s);
    }
    batch.Add(op_, std::move(inputs), attrs);
  }
  return batch.Run().status();
}

absl::Status Optimizer::AddStepTo(ProgramBuilder& program) {
  if (absl::Status st = CheckOptions(); !st.ok()) return st;
  std::vector<Tensor> todo, fresh;
  for (const Tensor& p : params_) {
    bool leaf = false;
    for (const Tensor& l : program.leaves_) leaf |= l.handle() == p.handle();
    if (!leaf) continue;
    todo.push_back(p);
    if (!state_.count(p.handle())) fresh.push_back(p);
  }
  if (todo.empty()) {
    return internal::ServerAnswer(::tensord::v1::INVALID_REQUEST,
                                  "client: none of the optimizer's parameters is a leaf of the "
                                  "program's backward (call Backward first)",
                                  {{"field", "backward.leaves"}});
  }
  const std::vector<std::string> names = StateNames();
  if (!names.empty() && !fresh.empty()) {
    if (absl::Status st = InitState(fresh); !st.ok()) return st;
  }
  const Attrs attrs = OpAttrs();
  for (const Tensor& p : todo) {
    std::vector<Operand> inputs = {p, Operand::GradientOf(p.handle())};
    if (!names.empty()) {
      for (const Tensor& s : state_.at(p.handle())) inputs.push_back(s);
    }
    program.Update(op_, std::move(inputs), attrs);
  }
  return absl::OkStatus();
}

Attrs Sgd::OpAttrs() const {
  return {{"lr", options_.lr},
          {"momentum", options_.momentum},
          {"dampening", options_.dampening},
          {"weight_decay", options_.weight_decay},
          {"nesterov", options_.nesterov},
          {"maximize", options_.maximize}};
}

std::vector<std::string> Sgd::StateNames() const {
  if (options_.momentum == 0) return {};
  return {"momentum_buffer", "step"};
}

absl::Status Sgd::CheckOptions() const {
  for (auto [name, value] : {std::pair<const char*, double>{"lr", options_.lr},
                             {"momentum", options_.momentum},
                             {"weight_decay", options_.weight_decay}}) {
    if (absl::Status st = AtLeastZero("sgd", name, value); !st.ok()) return st;
  }
  if (options_.nesterov && (options_.momentum <= 0 || options_.dampening != 0)) {
    return BadOption("sgd", "nesterov", 1, "it needs a positive momentum and zero dampening");
  }
  return absl::OkStatus();
}

Attrs Adam::OpAttrs() const {
  return {
      {"lr", options_.lr},           {"betas", std::vector<double>{options_.beta1, options_.beta2}},
      {"eps", options_.eps},         {"weight_decay", options_.weight_decay},
      {"amsgrad", options_.amsgrad}, {"maximize", options_.maximize}};
}

std::vector<std::string> Adam::StateNames() const {
  std::vector<std::string> names = {"exp_avg", "exp_avg_sq", "step"};
  if (options_.amsgrad) names.push_back("max_exp_avg_sq");
  return names;
}

absl::Status Adam::CheckOptions() const {
  const std::string& op = this->op();
  for (auto [name, value] : {std::pair<const char*, double>{"lr", options_.lr},
                             {"eps", options_.eps},
                             {"weight_decay", options_.weight_decay}}) {
    if (absl::Status st = AtLeastZero(op, name, value); !st.ok()) return st;
  }
  for (double beta : {options_.beta1, options_.beta2}) {
    if (!(beta >= 0 && beta < 1)) return BadOption(op, "betas", beta, "each must be in [0, 1)");
  }
  return absl::OkStatus();
}

}  // namespace tensord::client
