// Shared state behind Client, Session and Tensor objects. Not part of the public API.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cpp/client.h"
#include "client/cpp/status.h"
#include "client/cpp/tensor.h"
#include "grpcpp/grpcpp.h"
#include "tensord/v1/service.grpc.pb.h"

namespace tensord::client::internal {

struct Connection {
  std::string target;
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<::tensord::v1::Tensord::Stub> stub;

  // Applies the deadline and credentials of `options` to a call.
  void Prepare(grpc::ClientContext* context) const;
};

class SessionState {
 public:
  SessionState(std::shared_ptr<const Connection> connection,
               const ::tensord::v1::CreateSessionResponse& created, bool owned,
               std::string affinity_key = "");

  const std::string& id() const { return created_.session_id(); }
  const ::tensord::v1::CreateSessionResponse& created() const { return created_; }
  const Connection& connection() const { return *connection_; }
  ::tensord::v1::Tensord::Stub& stub() const { return *connection_->stub; }
  const std::string& affinity_key() const { return affinity_key_; }
  // The connection's deadline and credentials, and the session's affinity key
  // (x-tensord-session), for a call of this session.
  void Prepare(grpc::ClientContext* context) const;

  bool owned() const { return owned_.load(); }
  void set_owned(bool owned) { owned_ = owned; }
  bool closed() const { return closed_.load(); }
  void set_closed() { closed_ = true; }
  // SESSION_NOT_FOUND (origin=client) once this client closed the session: the server has
  // forgotten it, so nothing is sent.
  absl::Status CheckOpen() const;

  bool no_grad() const { return no_grad_depth_.load() > 0; }
  void EnterNoGrad() { ++no_grad_depth_; }
  void ExitNoGrad() { --no_grad_depth_; }

  // Sends `request` (its session id filled in); wraps every output in a Tensor.
  absl::StatusOr<::tensord::v1::ExecuteResponse> Execute(::tensord::v1::ExecuteRequest& request);
  // `progress` (may be empty) is called after each chunk with the bytes so far.
  absl::StatusOr<HostTensor> Get(uint64_t handle, uint32_t chunk_bytes,
                                 const std::function<void(uint64_t, uint64_t)>& progress = {});
  absl::StatusOr<uint32_t> Release(const std::vector<uint64_t>& handles);

  // Called when the last Tensor of a handle goes.
  void QueueRelease(uint64_t handle, uint64_t nbytes);
  // Handles the server freed by itself (gradients of a closed context): never sent again.
  void ForgetHandles(const std::vector<uint64_t>& handles);
  absl::Status FlushReleases();

 private:
  static constexpr size_t kReleaseBatchCount = 64;
  static constexpr uint64_t kReleaseBatchBytes = uint64_t{64} << 20;

  std::shared_ptr<const Connection> connection_;
  ::tensord::v1::CreateSessionResponse created_;
  const std::string affinity_key_;
  std::atomic<bool> owned_;
  std::atomic<bool> closed_{false};
  std::atomic<int> no_grad_depth_{0};
  std::mutex mu_;
  std::vector<uint64_t> pending_;           // guarded by mu_
  std::unordered_set<uint64_t> forgotten_;  // guarded by mu_
  uint64_t pending_bytes_ = 0;              // guarded by mu_
};

// The error of a call on a moved-from Session or AutodiffContext.
absl::Status NoSession();

// Reserves `n` bytes in `bytes` for a tensor about to be received. A large buffer is marked
// for transparent huge pages (as numpy marks its arrays): filling a fresh 256 MiB buffer
// otherwise takes 65,536 page faults, which cost more than the copy itself on a VM.
void ReserveTensorBytes(std::string& bytes, size_t n);

// The server's own answer to a mistake, given by the client without the round trip: domain
// "tensord", origin=client (see ClientErrorIn).
absl::Status ServerAnswer(ErrorReason reason, const std::string& message,
                          std::map<std::string, std::string> metadata);

// The handle to send for `t` in `state`'s session, or the error the server answers that
// mistake with (origin=client): a released handle names nothing, and a handle of another
// session names nothing here -- or, as handles count from 1 in every session, another tensor,
// which is why the client must refuse it. `where` (call_index, input_index, op, root_index,
// ...) says where the tensor was used.
absl::StatusOr<uint64_t> HandleIn(const SessionState& state, const Tensor& t,
                                  std::map<std::string, std::string> where);

// Wraps the outputs of an Execute response as Tensors of `state`.
std::vector<std::vector<Tensor>> AdoptOutputs(const std::shared_ptr<SessionState>& state,
                                              const ::tensord::v1::ExecuteResponse& response);

// Fills `call` (call `call_index` of its request) with the op, its operands and attributes;
// the first operand that cannot be sent (a failed StatusOr, or a tensor HandleIn refuses in
// `state`'s session) sets `*error` unless it holds an error already.
void FillCall(::tensord::v1::OpCall* call, const std::string& op,
              const std::vector<Operand>& inputs, const Attrs& attrs, const SessionState* state,
              absl::Status* error, int call_index = 0);

// Sends `request`, which holds one call, and returns that call's outputs.
absl::StatusOr<std::vector<Tensor>> ExecuteOneCall(const std::shared_ptr<SessionState>& state,
                                                   ::tensord::v1::ExecuteRequest& request);

// The output of a call of `op` (Op1's), or INVALID_REQUEST naming the op when it has several.
absl::StatusOr<Tensor> OnlyOutput(const std::string& op,
                                  absl::StatusOr<std::vector<Tensor>> outputs);

}  // namespace tensord::client::internal
