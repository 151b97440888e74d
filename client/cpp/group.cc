// Session::JoinGroup and Session::LeaveGroup: a session's membership in a process group.
#include "client/cpp/internal.h"
#include "client/cpp/session.h"
#include "client/cpp/status.h"

namespace tensord::client {

absl::StatusOr<GroupInfo> Session::JoinGroup(const std::string& group, int rank, int world_size,
                                             const std::string& rendezvous) {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::JoinGroupRequest request;
  request.set_session_id(state_->id());
  request.set_group(group);
  request.set_rank(rank);
  request.set_world_size(world_size);
  request.set_rendezvous(rendezvous);
  ::tensord::v1::JoinGroupResponse response;
  grpc::Status status = state_->stub().JoinGroup(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  const auto& g = response.group();
  return GroupInfo{g.name(), g.rank(), g.world_size(), g.backend()};
}

absl::Status Session::LeaveGroup() {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  grpc::ClientContext context;
  state_->Prepare(&context);
  ::tensord::v1::LeaveGroupRequest request;
  request.set_session_id(state_->id());
  ::tensord::v1::LeaveGroupResponse response;
  return FromGrpcStatus(state_->stub().LeaveGroup(&context, request, &response));
}

}  // namespace tensord::client
