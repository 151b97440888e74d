// Execute batches: resolve operands, run the calls through the dispatcher, and either commit
// every output as a new handle or leave the session exactly as it was. No gRPC or protobuf
// types: the RPC layer converts its request into a BatchSpec first.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/dispatch/dispatcher.h"
#include "server/service/limits.h"
#include "server/service/session.h"

namespace tensord {

struct OperandSpec {
  struct Handle {
    uint64_t handle = 0;
  };
  struct CallOutput {
    uint32_t call = 0;
    uint32_t output = 0;
  };
  struct Literal {
    DType dtype = DType::kF32;
    Shape shape;
    absl::string_view data;  // points into the request, which outlives the batch
  };
  // A number operand: a 0-d f64, i64 or bool tensor marked as a wrapped number.
  using Scalar = std::variant<double, int64_t, bool>;
  // Programs only: the value bound to parameter `index` at run time.
  struct Parameter {
    uint32_t index = 0;
  };
  // Program updates only: the gradient the backward computed for leaf handle `leaf`.
  struct Gradient {
    uint64_t leaf = 0;
  };
  // monostate: the operand named no source (BAD_OPERAND).
  std::variant<std::monostate, Handle, CallOutput, Literal, Scalar, Parameter, Gradient> source;
  // Programs: a Scalar's tensor, made once when the program is compiled (never for an operand
  // its op writes); null: made at every run.
  Tensor number;
};

struct CallSpec {
  std::string op;
  // The op's definition, resolved once for every run by CompileProgram; null: looked up by
  // name when the call runs (Execute batches).
  const OpDef* def = nullptr;
  std::vector<OperandSpec> inputs;
  AttrMap attrs;
  bool requires_grad = false;
  bool fetch = false;
  bool keep = false;     // programs: store the outputs (Execute stores every output)
  bool discard = false;  // Execute: no handles for the outputs (programs ignore it)
  // Programs only (program_fusion.h): the op the request named, when `op` and `def` now name
  // the fused op that computes this call together with the calls folded into it; and for a
  // folded call, the index of that call (-1: not folded). A folded call does not run.
  std::string requested_op;
  int64_t folded_into = -1;
};

struct BatchSpec {
  std::vector<CallSpec> calls;
  bool no_grad = false;
  uint64_t context_id = 0;
};

struct StoredTensor {
  uint64_t handle = 0;
  Tensor tensor;
};

struct CallOutcome {
  // Each output with its handle; handle 0 for the outputs of a discarded call, which are
  // listed only where the call fetched their values.
  std::vector<StoredTensor> outputs;
  std::vector<std::string> fetched;  // host bytes of each output when the call asked for fetch
};

struct ExecuteLimits {
  // Fetched bytes must fit the response message; above this the batch fails with
  // LIMIT_EXCEEDED (and rolls back) instead of failing later in the transport.
  int64_t max_fetch_bytes = int64_t{48} << 20;
  // Literals are checked against these before they are allocated, shape attributes before
  // each call, and op outputs (rank and dims; their bytes were charged) after it.
  ServiceLimits tensor_limits;
};

// Told of every call that ran, failed or not, and how long it took (the op metrics).
using CallObserver = std::function<void(const CallSpec& call, absl::Duration took)>;

// What a program run binds: its parameters, and for its updates the backward's gradients.
struct ProgramValues {
  std::vector<Tensor> parameters;
  bool gradients_ready = false;  // false in the forward: gradient operands are refused there
  std::vector<std::pair<uint64_t, Tensor>> gradients;  // leaf handle, gradient
};

class Transaction;

// The tensor of a number operand: 0-d f64, i64 or bool, marked as a wrapped number.
Tensor NumberTensor(const OperandSpec::Scalar& number);

// The environment of a batch's calls in `session`.
CallEnv BatchEnv(Session& session, bool no_grad, const std::function<bool()>& cancelled);

// Call `k` of a batch or a program: resolves its operands (`done` holds the outputs of the
// calls before it, `bound` a program run's values), saves its in-place targets in `txn` and
// runs it, reusing and filling `plan` where given (a program's call). Errors carry
// call_index=k and op; the caller rolls `txn` back.
absl::StatusOr<std::vector<Tensor>> RunBatchCall(
    const CallSpec& call, size_t k, const std::vector<std::vector<Tensor>>& done,
    uint64_t context_id, const CallEnv& env, Session& session, const Dispatcher& dispatcher,
    Transaction& txn, const ExecuteLimits& limits, const CallObserver& observe,
    const ProgramValues* bound = nullptr, CallPlan* plan = nullptr);

// Host bytes of the outputs of the calls that ask for fetch, counted into `fetch_bytes`
// (LIMIT_EXCEEDED fetch_bytes once it passes limits.max_fetch_bytes).
absl::StatusOr<std::vector<std::vector<std::string>>> FetchOutputs(
    const std::vector<const CallSpec*>& calls, const std::vector<std::vector<Tensor>>& done,
    const Dispatcher& dispatcher, const ExecuteLimits& limits, int64_t& fetch_bytes);

// Runs `batch` in `session` (whose lock the caller holds). Atomic: on error no handle was
// added, every touched autodiff tape is truncated back, in-place writes are undone, and the
// error carries metadata call_index=k of the failing call. With `fusion`, chains of discarded
// calls run as fused calls where they can (batch_fusion.h).
absl::StatusOr<std::vector<CallOutcome>> ExecuteBatch(
    Session& session, const Dispatcher& dispatcher, const BatchSpec& batch,
    const std::function<bool()>& cancelled, const ExecuteLimits& limits = {},
    const CallObserver& observe = {}, bool fusion = false);

// Per call of a batch, the discarded calls whose outputs can go once it ran (it is the last
// call reading them, or a discarded call nothing reads): discarded calls that do not fetch.
std::vector<std::vector<size_t>> DiscardedAfter(const std::vector<CallSpec>& calls);

// The tensor of an inline literal, charged to the session (BAD_TENSOR_DATA when the bytes do
// not match shape × dtype).
absl::StatusOr<Tensor> LiteralTensor(const Dispatcher& dispatcher, const Session& session,
                                     const OperandSpec::Literal& literal);

}  // namespace tensord
