// JoinGroup and LeaveGroup: a session's membership in a process group (docs/scaling.md).
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/service/convert.h"
#include "server/service/service_core.h"

namespace tensord {

absl::Status ServiceCore::JoinGroup(const v1::JoinGroupRequest& req, v1::JoinGroupResponse* resp) {
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  if (std::shared_ptr<distributed::ProcessGroup> held = session->group()) {
    return Error(Reason::kGroupNotJoined,
                 absl::StrCat("JoinGroup: the session already belongs to group '", held->name(),
                              "' (rank ", held->rank(), "); LeaveGroup first"),
                 {{"group", held->name()}});
  }
  const distributed::GroupOptions options{req.group(), req.rank(), req.world_size(),
                                          req.rendezvous()};
  // Waits for every rank, so without the session's lock: the session's other calls go on.
  ASSIGN_OR_RETURN(std::shared_ptr<distributed::ProcessGroup> group,
                   distributed::JoinGroup(options, config_.collectives));
  {
    absl::MutexLock lock(&session->mu());
    RETURN_IF_ERROR(session->CheckLive());
  }
  RETURN_IF_ERROR(session->SetGroup(group));
  FillGroupInfo(*group, resp->mutable_group());
  return absl::OkStatus();
}

absl::Status ServiceCore::LeaveGroup(const v1::LeaveGroupRequest& req,
                                     v1::LeaveGroupResponse* resp) {
  (void)resp;
  ASSIGN_OR_RETURN(SessionRef session, sessions_.Find(req.session_id()));
  // Under the session's lock, so a batch running a collective finishes first.
  absl::MutexLock lock(&session->mu());
  RETURN_IF_ERROR(session->CheckLive());
  if (session->TakeGroup() == nullptr) {
    return Error(Reason::kGroupNotJoined, "LeaveGroup: the session belongs to no process group");
  }
  return absl::OkStatus();
}

}  // namespace tensord
