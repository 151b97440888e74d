// Session: a client's namespace on the server (tensors, autodiff contexts), and the calls made
// in it: Put/Get streams, eager ops, batches, autodiff contexts and backward.
//
//   ASSIGN_OR_RETURN(Session s, client.CreateSession());
//   ASSIGN_OR_RETURN(AutodiffContext ctx, s.OpenAutodiff(Checkpointing::kBalanced));
//   ASSIGN_OR_RETURN(Tensor w, s.Put(HostTensor(values, {2, 2}), {true, ctx.id()}));
//   ASSIGN_OR_RETURN(Tensor loss, Sum(Relu(Matmul(x, w))));
//   ASSIGN_OR_RETURN(Gradients g, ctx.Backward({loss}));
//   Batch update = s.NewBatch({/*no_grad=*/true});
//   update.Add("assign", {w, update.Add("sub", {w, update.Add("mul", {g.grad(w), 0.1})})});
//   RETURN_IF_ERROR(update.Run().status());
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/cpp/host_tensor.h"
#include "client/cpp/tensor.h"
#include "tensord/v1/service.pb.h"

namespace tensord::client {

enum class Checkpointing {
  kNone,      // keep every activation saved for backward
  kBalanced,  // keep inputs of compute-bound ops, recompute the rest during backward
};

// How far a Put or Get has come: bytes of the tensor sent or received so far, of `total`.
// Called on the calling thread, once per chunk, so it should return quickly (a progress bar
// redraws at its own pace).
using TransferProgress = std::function<void(uint64_t done, uint64_t total)>;

struct PutOptions {
  bool requires_grad = false;  // make the tensor a requires-grad leaf of `context`
  uint64_t context = 0;        // AutodiffContext::id()
  std::string device;          // empty = the session's device
  size_t chunk_bytes = size_t{1} << 20;
  TransferProgress progress;  // after each chunk is written; empty = not called
};

struct GetOptions {
  uint32_t chunk_bytes = 0;   // 0 = the server's chunk size
  TransferProgress progress;  // after each chunk arrives; empty = not called
};

struct OpOptions {
  bool requires_grad = false;  // float outputs become requires-grad leaves of `context`
  uint64_t context = 0;
  bool no_grad = false;  // compute without recording (also implied by a NoGradGuard)
};

struct BatchOptions {
  bool no_grad = false;  // compute without recording: optimizer updates, assign
  uint64_t context = 0;  // the context of calls with requires_grad
};

struct CallOptions {
  bool requires_grad = false;
  bool fetch = false;  // return the outputs' values inline (BatchResult::values)
  // No handles for the outputs (BatchResult::outputs of the call is empty; with fetch the
  // values still come back): for intermediates that later calls of the batch read and nobody
  // names afterwards. The server frees them after their last reader, and runs a discarded
  // product with the discarded bias, activation or residual add after it as one fused call.
  bool discard = false;
};

struct ProgramCallOptions {
  bool fetch = false;  // return the outputs' values with every run
  bool keep = false;   // store the outputs as tensors of the session at every run
  bool requires_grad = false;
};

struct ContextInfo {
  uint64_t context_id = 0;
  std::string checkpointing;  // "none", "balanced"
  std::string state;          // "open", "closed"
  uint64_t tape_nodes = 0;
  uint64_t saved_bytes = 0;
  friend bool operator==(const ContextInfo& a, const ContextInfo& b);
  friend bool operator!=(const ContextInfo& a, const ContextInfo& b) { return !(a == b); }
};

// A compiled program of the session (docs/programs.md).
struct ProgramInfo {
  uint64_t program_id = 0;
  uint32_t parameters = 0;
  uint32_t calls = 0;    // forward calls
  uint32_t updates = 0;  // calls after the backward
  uint64_t context_id = 0;
  bool backward = false;
  uint64_t runs = 0;  // runs that committed
  friend bool operator==(const ProgramInfo& a, const ProgramInfo& b);
  friend bool operator!=(const ProgramInfo& a, const ProgramInfo& b) { return !(a == b); }
};

// The metadata key of a session's affinity key (docs/scaling.md).
inline constexpr char kSessionMetadataKey[] = "x-tensord-session";

// A shared memory region registered in the session (client/cpp/shared_memory.h).
struct SharedMemoryInfo {
  std::string name;
  std::string key;  // the POSIX shared memory object
  uint64_t offset = 0;
  uint64_t byte_size = 0;
  friend bool operator==(const SharedMemoryInfo& a, const SharedMemoryInfo& b) {
    return a.name == b.name && a.key == b.key && a.offset == b.offset && a.byte_size == b.byte_size;
  }
  friend bool operator!=(const SharedMemoryInfo& a, const SharedMemoryInfo& b) { return !(a == b); }
};

// The process group a session joined (Session::JoinGroup).
struct GroupInfo {
  std::string name;
  int rank = 0;
  int world_size = 0;
  std::string backend;  // the communication library: "gloo"
  friend bool operator==(const GroupInfo& a, const GroupInfo& b) {
    return a.name == b.name && a.rank == b.rank && a.world_size == b.world_size &&
           a.backend == b.backend;
  }
  friend bool operator!=(const GroupInfo& a, const GroupInfo& b) { return !(a == b); }
};

// GetSessionInfo. Comparable, so "the session is exactly as before" is one EXPECT_EQ.
struct SessionInfo {
  std::string session_id;
  std::string device;
  uint64_t memory_used_bytes = 0;
  uint64_t memory_quota_bytes = 0;
  uint64_t ttl_seconds = 0;
  bool autodiff_enabled = true;
  std::string float32_matmul_precision = "highest";
  std::vector<TensorInfo> tensors;  // sorted by handle
  std::vector<ContextInfo> contexts;
  std::vector<ProgramInfo> programs;            // by program id
  std::vector<SharedMemoryInfo> shared_memory;  // by name
  std::optional<GroupInfo> group;               // none when the session joined no group
  const ContextInfo* context(uint64_t id) const;
  std::string ToString() const;
  friend bool operator==(const SessionInfo& a, const SessionInfo& b);
  friend bool operator!=(const SessionInfo& a, const SessionInfo& b) { return !(a == b); }
};
std::ostream& operator<<(std::ostream& os, const ContextInfo& info);
std::ostream& operator<<(std::ostream& os, const SessionInfo& info);

// A call of a Batch; converts to its first output, out(k) names output k.
class ProgramBuilder;

class CallRef {
 public:
  explicit CallRef(uint32_t call) : call_(call) {}
  uint32_t index() const { return call_; }
  CallOutput out(uint32_t k) const { return {call_, k}; }
  operator Operand() const { return Operand(CallOutput{call_, 0}); }  // NOLINT

 private:
  uint32_t call_;
};

class BatchResult {
 public:
  // Outputs of call `call`, in order. Intermediate outputs are released when the result goes.
  const std::vector<Tensor>& outputs(size_t call) const { return outputs_.at(call); }
  const Tensor& output(CallRef call, size_t k = 0) const { return outputs_.at(call.index()).at(k); }
  // Values of a call made with fetch = true.
  const std::vector<HostTensor>& values(size_t call) const { return values_.at(call); }
  const HostTensor& value(CallRef call, size_t k = 0) const {
    return values_.at(call.index()).at(k);
  }
  size_t size() const { return outputs_.size(); }

 private:
  friend class Batch;
  std::vector<std::vector<Tensor>> outputs_;
  std::vector<std::vector<HostTensor>> values_;
};

// Many op calls sent as one atomic Execute: if call k fails, nothing of the batch remains and
// the error's metadata has call_index=k.
class Batch {
 public:
  CallRef Add(const std::string& op, std::vector<Operand> inputs, const Attrs& attrs = {},
              const CallOptions& options = {});
  size_t size() const { return static_cast<size_t>(request_.calls_size()); }
  // Sends the batch. The batch may be run again (every run creates new outputs).
  absl::StatusOr<BatchResult> Run();

 private:
  friend class Session;
  friend class Optimizer;  // an optimizer step is a batch of the parameters' session
  Batch(std::shared_ptr<internal::SessionState> state, BatchOptions options);
  std::shared_ptr<internal::SessionState> state_;
  BatchOptions options_;
  ::tensord::v1::ExecuteRequest request_;
  std::vector<Tensor> keep_alive_;  // tensor operands stay alive until the batch is sent
  absl::Status error_;              // the first operand error
};

// Gradients of one Backward: leaf handle → gradient tensor.
class Gradients {
 public:
  // The gradient of `leaf`; an undefined Tensor when the leaf was not reached.
  Tensor grad(const Tensor& leaf) const;
  bool contains(const Tensor& leaf) const { return by_leaf_.count(leaf.handle()) > 0; }
  size_t size() const { return by_leaf_.size(); }
  const std::map<uint64_t, Tensor>& by_leaf() const { return by_leaf_; }

 private:
  friend class AutodiffContext;
  std::map<uint64_t, Tensor> by_leaf_;
};

// Gradients the server reduces across the session's process group while the backward runs
// (data-parallel training, as torch's DistributedDataParallel does): buckets of requires-grad
// leaves, each flattened and all-reduced as soon as the backward has finished its gradients,
// in the order given (list them as the backward finishes them: the last layers first).
struct GradientReduction {
  std::vector<std::vector<Tensor>> buckets;
  std::string op = "mean";  // or "sum"
};

// A server-side autodiff context. Closed when the object goes (or by Close()); its autodiff
// tensors then stay readable but any op on them fails with AUTODIFF_CONTEXT_NOT_ENABLED, and
// the gradients its Backward calls produced are freed.
class AutodiffContext {
 public:
  AutodiffContext(AutodiffContext&& other) noexcept;
  AutodiffContext& operator=(AutodiffContext&& other) noexcept;
  AutodiffContext(const AutodiffContext&) = delete;
  AutodiffContext& operator=(const AutodiffContext&) = delete;
  ~AutodiffContext();

  uint64_t id() const { return id_; }
  Checkpointing checkpointing() const { return checkpointing_; }

  // Reverse pass from `roots` (one-element autodiff tensors, or any shape with one seed per
  // root) to every reachable requires-grad leaf of this context. Without retain_graph the
  // walked part of the tape is freed.
  absl::StatusOr<Gradients> Backward(const std::vector<Tensor>& roots,
                                     const std::vector<Tensor>& seeds = {},
                                     bool retain_graph = false);
  // The same, with the gradients of `reduce`'s leaves reduced across the session's group:
  // every rank calls it with buckets of the same sizes, and gets the reduced gradients.
  absl::StatusOr<Gradients> Backward(const std::vector<Tensor>& roots,
                                     const GradientReduction& reduce,
                                     const std::vector<Tensor>& seeds = {},
                                     bool retain_graph = false);
  absl::Status Close();

 private:
  absl::StatusOr<Gradients> Run(const std::vector<Tensor>& roots, const std::vector<Tensor>& seeds,
                                bool retain_graph, const GradientReduction* reduce);
  friend class Session;
  AutodiffContext(std::shared_ptr<internal::SessionState> state, uint64_t id,
                  Checkpointing checkpointing);
  std::shared_ptr<internal::SessionState> state_;
  uint64_t id_ = 0;
  Checkpointing checkpointing_ = Checkpointing::kNone;
  bool closed_ = false;
  std::vector<uint64_t> gradient_handles_;  // freed by the server when the context closes
};

// While alive, eager ops and batches of its session compute without recording (like
// torch::NoGradGuard, but per session and across threads using that session).
class NoGradGuard {
 public:
  explicit NoGradGuard(std::shared_ptr<internal::SessionState> state);
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;
  ~NoGradGuard();

 private:
  std::shared_ptr<internal::SessionState> state_;
};

class Session {
 public:
  Session(Session&& other) noexcept = default;
  Session& operator=(Session&& other) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  // Closes the server session unless Detach() was called or it was attached by id.
  ~Session();

  const std::string& id() const;
  const std::string& device() const;
  uint64_t ttl_seconds() const;
  uint64_t memory_quota_bytes() const;
  bool autodiff_enabled() const;
  // "highest", "high" or "medium" (SessionOptions::float32_matmul_precision).
  const std::string& float32_matmul_precision() const;

  // Client-streaming upload in chunks (any size; nothing is stored unless all bytes arrive).
  absl::StatusOr<Tensor> Put(const HostTensor& value, const PutOptions& options = {});
  // Server-streaming download (chunk_bytes 0 = the server's chunk size).
  absl::StatusOr<HostTensor> Get(const Tensor& tensor, uint32_t chunk_bytes = 0);
  absl::StatusOr<HostTensor> Get(uint64_t handle, uint32_t chunk_bytes = 0);
  // The same with options: the chunk size and a progress callback.
  absl::StatusOr<HostTensor> Get(const Tensor& tensor, const GetOptions& options);
  absl::StatusOr<HostTensor> Get(uint64_t handle, const GetOptions& options);

  // One op call (one Execute); its outputs.
  absl::StatusOr<std::vector<Tensor>> Op(const std::string& op, std::vector<Operand> inputs,
                                         const Attrs& attrs = {}, const OpOptions& options = {});
  // An op with exactly one output.
  absl::StatusOr<Tensor> Op1(const std::string& op, std::vector<Operand> inputs,
                             const Attrs& attrs = {}, const OpOptions& options = {});
  Batch NewBatch(const BatchOptions& options = {});
  // A program whose forward records on `context` (0: none, no backward) unless `no_grad`.
  ProgramBuilder NewProgram(uint64_t context = 0, bool no_grad = false);
  // A guard under which eager ops and batches of this session do not record.
  NoGradGuard NoGrad();

  // Frees handles now (atomic: an unknown handle frees nothing). Returns how many were freed.
  absl::StatusOr<uint32_t> Release(const std::vector<Tensor>& tensors);
  absl::StatusOr<uint32_t> Release(const std::vector<uint64_t>& handles);
  // Sends the queued releases of dropped Tensors.
  absl::Status FlushReleases();
  // Resets the idle timer; returns the TTL in seconds.
  absl::StatusOr<uint64_t> KeepAlive();
  // Flushes queued releases, then GetSessionInfo.
  absl::StatusOr<SessionInfo> Info();
  absl::StatusOr<AutodiffContext> OpenAutodiff(Checkpointing checkpointing = Checkpointing::kNone);
  // Joins a process group of sessions on world_size servers as `rank` (docs/scaling.md);
  // blocks until every rank has joined. `group` is the same on every rank and new for each
  // launch; `rendezvous` is "file:///shared/dir" or "redis://host:port". The collective ops
  // (all_reduce, all_gather, reduce_scatter, broadcast, reduce, barrier) then run across it.
  absl::StatusOr<GroupInfo> JoinGroup(const std::string& group, int rank, int world_size,
                                      const std::string& rendezvous);
  // GROUP_NOT_JOINED when the session belongs to no group.
  absl::Status LeaveGroup();
  // Frees everything in the session on the server.
  absl::Status Close();
  // Leaves the server session alive after this object goes (until its TTL).
  void Detach();

  const std::shared_ptr<internal::SessionState>& state() const { return state_; }
  // The key every call of the session carries as x-tensord-session, so that a balancer
  // hashing on it keeps the session on one replica (docs/scaling.md); empty for a session
  // attached without one.
  const std::string& affinity_key() const;

 private:
  friend class Client;
  explicit Session(std::shared_ptr<internal::SessionState> state) : state_(std::move(state)) {}
  std::shared_ptr<internal::SessionState> state_;
};

}  // namespace tensord::client
