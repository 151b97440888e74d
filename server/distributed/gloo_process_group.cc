// The Gloo process group: TCP pairs between every two ranks of the group (one listening
// device per server, shared by its groups), the statements of collective_agreement.h sent to
// every peer before each collective, and Gloo's algorithms for the data in host memory; a
// device's data moves with the device's library (NCCL), through a communicator per device
// made when the ranks first need one (its identity broadcast over Gloo).
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "server/distributed/collective_agreement.h"
#include "server/distributed/gloo_data.h"
#include "server/distributed/gloo_rendezvous.h"
#include "server/distributed/process_group.h"

namespace tensord::distributed {
namespace {

constexpr uint8_t kStatementSlot = 0x7d;
// A group's name keys the rendezvous store and travels in every error of the group.
constexpr size_t kMaxGroupNameBytes = 256;

using Clock = std::chrono::steady_clock;
// How long a rank that saw a collective fail while data moved waits for the others to say in
// the store that they are alive (they notice within milliseconds of it).
constexpr int64_t kAliveGraceMs = 2000;

// One TCP device per address, shared by every group of the process. Without an address, the
// machine's host name, or the loopback address where the host name does not resolve (a
// container without an entry for itself): peers on other machines need --collective-address.
absl::StatusOr<std::shared_ptr<gloo::transport::Device>> Device(const std::string& address) {
  static absl::Mutex mu;
  static auto* devices = new std::map<std::string, std::shared_ptr<gloo::transport::Device>>();
  // Gloo writes to its peers with plain write(2): a peer that died would raise SIGPIPE, whose
  // default action ends this process too. Ignored, the write fails with EPIPE, which Gloo turns
  // into the error the collective reports.
  static const bool sigpipe_ignored = [] {
    std::signal(SIGPIPE, SIG_IGN);
    return true;
  }();
  (void)sigpipe_ignored;
  absl::MutexLock lock(&mu);
  auto it = devices->find(address);
  if (it != devices->end()) return it->second;
  std::vector<std::string> candidates = {address};
  if (address.empty()) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    candidates = {host, "127.0.0.1"};
  }
  std::string failures;
  for (const std::string& hostname : candidates) {
    gloo::transport::tcp::attr attr;
    attr.hostname = hostname;
    try {
      auto device = gloo::transport::tcp::CreateDevice(attr);
      (*devices)[address] = device;
      return device;
    } catch (const std::exception& e) {
      absl::StrAppend(&failures, failures.empty() ? "" : "; ", hostname, ": ", e.what());
    }
  }
  return Error(Reason::kInvalidRequest,
               absl::StrCat("JoinGroup: cannot listen for collectives (set --collective-address "
                            "to an address of this machine): ",
                            failures),
               {{"address", address}});
}

std::string CanonicalAttrs(const Attrs& attrs) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : attrs.map())
    parts.push_back(absl::StrCat(k, "=", AttrValueToString(v)));
  return absl::StrJoin(parts, ",");
}

class GlooProcessGroup final : public ProcessGroup {
 public:
  GlooProcessGroup(GroupOptions options, std::shared_ptr<gloo::Context> context,
                   std::chrono::milliseconds timeout, std::unique_ptr<GroupStore> store)
      : ProcessGroup(std::move(options)),
        context_(std::move(context)),
        timeout_(timeout),
        store_(std::move(store)) {}

  std::string backend() const override { return "gloo"; }

  absl::Status Run(const CollectiveCall& call) override {
    const std::string& op = call.op.name;
    if (broken_.load()) {
      return Error(
          Reason::kPeerUnavailable,
          absl::StrCat(op, ": group '", name(), "' broke in an earlier collective (",
                       broken_reason_, "); join a group again"),
          {{"op", op}, {"group", name()}, {"rank", absl::StrCat(rank())}, {"cause", "broken"}});
    }
    const uint32_t seq = seq_++;
    CollectiveStatement mine;
    if (call.refusal.ok()) {
      mine.op = op;
      mine.attrs = CanonicalAttrs(call.attrs);
      if (!call.tag.empty()) absl::StrAppend(&mine.attrs, ";", call.tag);
      mine.device = call.device;
      mine.library = call.library != nullptr ? call.library->library() : backend();
      mine.new_communicator =
          call.library != nullptr && communicators_.find(call.device) == communicators_.end();
      if (!call.inputs.empty()) {
        mine.dtype = call.inputs[0].dtype();
        mine.shape = call.inputs[0].shape();
      }
    } else {
      mine = Refusal(op, call.device, call.refusal);
    }
    ASSIGN_OR_RETURN(std::vector<CollectiveStatement> all, Exchange(op, seq, mine));
    if (!call.refusal.ok()) return call.refusal;
    RETURN_IF_ERROR(Agree(rank(), name(), all));
    if (call.library != nullptr) return MoveOnDevice(call, seq, all);
    try {
      MoveWithGloo(context_, call, seq, timeout_);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      // Closing this rank's connections first makes the peers still moving data fail now
      // too, so that each of them looks for the missing rank at the same time.
      context_.reset();
      return Break(op, MissingPeer(seq), what);
    }
    return absl::OkStatus();
  }

  void Abort() override {
    absl::MutexLock lock(&mu_);
    aborted_ = true;
    if (waiting_ != nullptr) waiting_->abortWaitRecv();
    if (moving_ != nullptr) moving_->Abort();
  }

 private:
  // Sends this rank's statement to every peer and receives theirs (index = rank).
  absl::StatusOr<std::vector<CollectiveStatement>> Exchange(const std::string& op, uint32_t seq,
                                                            const CollectiveStatement& mine) {
    const int n = size();
    const std::string encoded = Encode(mine);
    std::vector<std::string> in(n, std::string(kStatementBytes, '\0'));
    std::vector<std::string> out(n, encoded);
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> recv(n), send(n);
    const uint64_t slot = gloo::Slot::build(kStatementSlot, seq);
    // Every live peer gets this rank's statement, even when another's connection is gone, so
    // that each finds the rank that really failed; what was sent is delivered before a break.
    const auto flush_then_break = [&](int peer, const std::string& what, std::string cause = "") {
      for (int r = 0; r < n; ++r) {
        if (send[r] == nullptr) continue;
        try {
          send[r]->waitSend(nullptr, std::min(timeout_, std::chrono::milliseconds(1000)));
        } catch (const std::exception&) {
          // That peer is gone too.
        }
      }
      return Break(op, peer, what, std::move(cause));
    };
    int peer = -1;
    std::string failure;
    for (int r = 0; r < n; ++r) {
      if (r == rank()) continue;
      try {
        recv[r] = context_->createUnboundBuffer(in[r].data(), kStatementBytes);
        recv[r]->recv(r, slot);
        auto buffer = context_->createUnboundBuffer(out[r].data(), kStatementBytes);
        buffer->send(r, slot);
        send[r] = std::move(buffer);
      } catch (const std::exception& e) {
        if (peer < 0) {
          peer = r;
          failure = e.what();
        }
      }
    }
    if (peer >= 0) return flush_then_break(peer, failure);
    try {
      const Clock::time_point deadline = Clock::now() + timeout_;
      for (int r = 0; r < n; ++r) {
        if (r == rank()) continue;
        peer = r;
        {
          absl::MutexLock lock(&mu_);
          if (aborted_) return flush_then_break(r, "the session closed", "aborted");
          waiting_ = recv[r].get();
        }
        // Abort() may only reach the buffer while it exists: forgotten on every way out.
        const auto forget = absl::MakeCleanup([this] {
          absl::MutexLock lock(&mu_);
          waiting_ = nullptr;
        });
        const auto left = std::max(
            std::chrono::milliseconds(1),
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
        if (!recv[r]->waitRecv(nullptr, left)) {
          return flush_then_break(r, "the session closed", "aborted");
        }
      }
      for (int r = 0; r < n; ++r) {
        if (r == rank()) continue;
        peer = r;
        send[r]->waitSend(nullptr, timeout_);
      }
    } catch (const std::exception& e) {
      return flush_then_break(peer, e.what());
    }
    std::vector<CollectiveStatement> all(n);
    for (int r = 0; r < n; ++r) {
      if (r == rank()) {
        all[r] = mine;
        continue;
      }
      ASSIGN_OR_RETURN(all[r], Decode(in[r]));
    }
    return all;
  }

  // After a failure while the data moved, which no connection error attributes to a rank:
  // every rank still alive says so in the rendezvous store, and the first rank that does not
  // within a grace period (a live one notices at once: the failing ranks close their
  // connections) is the one that broke the collective; -1 when all answer or the store fails.
  int MissingPeer(uint32_t seq) {
    if (store_ == nullptr) return -1;
    const std::string prefix = absl::StrCat("alive/", seq, "/");
    const auto deadline =
        Clock::now() + std::min(timeout_, std::chrono::milliseconds(kAliveGraceMs));
    std::vector<bool> seen(size(), false);
    seen[rank()] = true;
    try {
      store_->set(absl::StrCat(prefix, rank()), {'1'});
      while (true) {
        int missing = -1;
        for (int r = 0; r < size(); ++r) {
          if (!seen[r]) seen[r] = store_->Has(absl::StrCat(prefix, r));
          if (!seen[r] && missing < 0) missing = r;
        }
        if (missing < 0 || Clock::now() >= deadline) return missing;
        {
          absl::MutexLock lock(&mu_);
          if (aborted_) return missing;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } catch (const std::exception&) {
      return -1;
    }
  }

  absl::Status Break(const std::string& op, int peer, const std::string& what,
                     std::string cause = "") {
    if (cause.empty()) cause = absl::StrContains(what, "Timed out") ? "timeout" : "connection";
    broken_reason_ = peer >= 0 ? absl::StrCat("rank ", peer, ": ", what) : what;
    broken_.store(true);
    communicators_.clear();
    // Closing this rank's connections makes every peer still waiting on it fail now, not at
    // its own timeout (the connections close once the last buffer of the call goes).
    context_.reset();
    Metadata md = {{"op", op}, {"group", name()}, {"rank", absl::StrCat(rank())}, {"cause", cause}};
    if (peer >= 0) md["peer_rank"] = absl::StrCat(peer);
    return Error(
        Reason::kPeerUnavailable,
        absl::StrCat(op, ": ",
                     peer >= 0
                         ? absl::StrCat("rank ", peer, " of group '", name(), "' did not take part")
                         : absl::StrCat("group '", name(), "' lost a peer"),
                     cause == "timeout" ? absl::StrCat(" within ", timeout_.count(), " ms") : "",
                     " (", what, "); the group is broken, join a group again"),
        md);
  }

  // The data of an agreed collective on the device, with its library's communicator: a new
  // one on every rank when any rank needs one.
  absl::Status MoveOnDevice(const CollectiveCall& call, uint32_t seq,
                            const std::vector<CollectiveStatement>& all) {
    const std::string& op = call.op.name;
    if (std::any_of(all.begin(), all.end(),
                    [](const CollectiveStatement& s) { return s.new_communicator; })) {
      communicators_.erase(call.device);
      ASSIGN_OR_RETURN(std::string id, SharedId(call, seq));
      absl::StatusOr<std::unique_ptr<DeviceCommunicator>> joined =
          call.library->Join(id, rank(), size(), timeout_);
      if (!joined.ok()) return DeviceFailure(op, seq, joined.status());
      communicators_[call.device] = *std::move(joined);
    }
    DeviceCommunicator* comm = communicators_[call.device].get();
    {
      absl::MutexLock lock(&mu_);
      if (aborted_) comm->Abort();
      moving_ = comm;
    }
    const Tensor& in = call.inputs[0];
    Tensor& out = call.outputs[0];
    const std::string reduce = call.attrs.Has("op") ? call.attrs.GetString("op") : "sum";
    absl::Status moved;
    switch (call.op.collective) {
      case CollectiveKind::kAllReduce:
        moved = comm->AllReduce(in, out, reduce);
        break;
      case CollectiveKind::kAllGather:
        moved = comm->AllGather(in, out);
        break;
      case CollectiveKind::kReduceScatter:
        moved = comm->ReduceScatter(in, out, reduce);
        break;
      case CollectiveKind::kBroadcast:
        moved = comm->Broadcast(in, out, static_cast<int>(call.attrs.GetInt("src")));
        break;
      case CollectiveKind::kReduce:
        moved = comm->Reduce(in, out, reduce, static_cast<int>(call.attrs.GetInt("dst")));
        break;
      default:
        moved = Error(Reason::kInternal, absl::StrCat(op, ": not a collective of tensors"));
    }
    {
      // Forgotten before a failed communicator goes: Abort() may only reach it while it exists.
      absl::MutexLock lock(&mu_);
      moving_ = nullptr;
    }
    if (moved.ok()) return moved;
    communicators_.erase(call.device);
    return DeviceFailure(op, seq, moved);
  }

  // The identity of a new communicator: made by rank 0, broadcast to the others (a flag byte
  // first, so that every rank fails alike when rank 0 cannot make one).
  absl::StatusOr<std::string> SharedId(const CollectiveCall& call, uint32_t seq) {
    const std::string& op = call.op.name;
    const size_t n = call.library->id_bytes();
    std::string buffer(1 + n, '\0');
    absl::Status made;
    if (rank() == 0) {
      absl::StatusOr<std::string> id = call.library->NewId();
      if (id.ok() && id->size() == n) {
        buffer[0] = 1;
        std::memcpy(&buffer[1], id->data(), n);
      } else {
        made =
            id.ok() ? Error(Reason::kInternal, "a communicator id of the wrong size") : id.status();
      }
    }
    try {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(reinterpret_cast<uint8_t*>(buffer.data()), buffer.size());
      opts.setRoot(0);
      opts.setTag(seq);
      opts.setTimeout(timeout_);
      gloo::broadcast(opts);
    } catch (const std::exception& e) {
      const std::string what = e.what();
      context_.reset();
      return Break(op, MissingPeer(seq), what);
    }
    RETURN_IF_ERROR(made);
    if (buffer[0] != 1) {
      return Error(Reason::kInternal,
                   absl::StrCat(op, ": rank 0 of group '", name(), "' could not make a ",
                                call.library->library(), " communicator"),
                   {{"cause", "communicator"}});
    }
    return buffer.substr(1);
  }

  // A failure of the device's library: a lost or late peer breaks the group, as Gloo's do.
  absl::Status DeviceFailure(const std::string& op, uint32_t seq, const absl::Status& status) {
    if (GetReason(status) != Reason::kPeerUnavailable) return status;
    const Metadata md = GetMetadata(status);
    const auto cause = md.find("cause");
    return Break(op, MissingPeer(seq), std::string(status.message()),
                 cause != md.end() ? cause->second : "");
  }

  std::shared_ptr<gloo::Context> context_;
  const std::chrono::milliseconds timeout_;
  const std::unique_ptr<GroupStore> store_;  // the rendezvous store, kept for MissingPeer
  uint32_t seq_ = 0;  // the tag of the next collective; the same on every rank
  std::atomic<bool> broken_{false};
  std::string broken_reason_;
  absl::Mutex mu_;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  gloo::transport::UnboundBuffer* waiting_ ABSL_GUARDED_BY(mu_) = nullptr;  // a peer's statement
  DeviceCommunicator* moving_ ABSL_GUARDED_BY(mu_) = nullptr;  // the communicator of a call
  // A communicator of the device's library per device of this rank that used one.
  std::map<std::string, std::unique_ptr<DeviceCommunicator>> communicators_;
};

}  // namespace

absl::StatusOr<std::shared_ptr<ProcessGroup>> JoinGroup(const GroupOptions& options,
                                                        const CollectiveConfig& config) {
  const Metadata md = {{"group", options.name}, {"rank", absl::StrCat(options.rank)}};
  if (options.world_size > kMaxWorldSize) {
    return Error(Reason::kLimitExceeded,
                 absl::StrCat("JoinGroup: world_size ", options.world_size, " is above ",
                              kMaxWorldSize, " ranks"),
                 {{"limit", "max_world_size"},
                  {"value", absl::StrCat(options.world_size)},
                  {"max", absl::StrCat(kMaxWorldSize)}});
  }
  if (!config.rendezvous_prefixes.empty() &&
      std::none_of(config.rendezvous_prefixes.begin(), config.rendezvous_prefixes.end(),
                   [&](const std::string& p) { return absl::StartsWith(options.rendezvous, p); })) {
    return Error(
        Reason::kInvalidRequest,
        absl::StrCat("JoinGroup: rendezvous '", options.rendezvous,
                     "' is not one this server allows (--collective-rendezvous-prefix: ",
                     absl::StrJoin(config.rendezvous_prefixes, ", "), ")"),
        {{"field", "rendezvous"}, {"value", options.rendezvous}, {"cause", "not_allowed"}});
  }
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return Error(Reason::kInvalidRequest,
                 absl::StrCat("JoinGroup: rank ", options.rank,
                              " is not in [0, world_size=", options.world_size, ")"),
                 {{"field", "rank"}, {"value", absl::StrCat(options.rank)}});
  }
  if (options.name.empty() || options.name.size() > kMaxGroupNameBytes) {
    return Error(Reason::kInvalidRequest,
                 absl::StrCat("JoinGroup: the group name '", options.name, "' is ",
                              options.name.empty() ? "empty" : "too long", " (1 to ",
                              kMaxGroupNameBytes, " bytes)"),
                 {{"field", "group"}, {"value", options.name}});
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GroupStore> store,
                   OpenRendezvous(options.rendezvous, options.name, config.timeout));
  ASSIGN_OR_RETURN(std::shared_ptr<gloo::transport::Device> device, Device(config.address));
  const std::string joined = "joined/";
  // The store keeps what an earlier launch of the same name wrote; joining on it would meet
  // stale addresses.
  bool reused = false;
  try {
    reused = store->Has(absl::StrCat(joined, options.rank));
  } catch (const std::exception& e) {
    return Error(Reason::kPeerUnavailable,
                 absl::StrCat("JoinGroup: cannot read the rendezvous store '", options.rendezvous,
                              "': ", e.what()),
                 {{"group", options.name}, {"cause", "rendezvous"}});
  }
  if (reused) {
    return Error(Reason::kInvalidRequest,
                 absl::StrCat("JoinGroup: rank ", options.rank, " of group '", options.name,
                              "' already joined through this rendezvous store; a group name is "
                              "used once per store: give each launch a new one"),
                 {{"field", "group"}, {"value", options.name}});
  }
  int waiting_for = -1;
  try {
    store->set(absl::StrCat(joined, options.rank), {'1'});
    // Each rank's arrival first, so a rank that never comes is named.
    const Clock::time_point deadline = Clock::now() + config.timeout;
    for (int r = 0; r < options.world_size; ++r) {
      waiting_for = r;
      const auto left =
          std::max(std::chrono::milliseconds(1),
                   std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
      store->wait({absl::StrCat(joined, r)}, left);
    }
    waiting_for = -1;
    auto context = std::make_shared<gloo::rendezvous::Context>(options.rank, options.world_size);
    context->setTimeout(config.timeout);
    context->connectFullMesh(*store, device);
    return std::shared_ptr<ProcessGroup>(std::make_shared<GlooProcessGroup>(
        options, std::move(context), config.timeout, std::move(store)));
  } catch (const std::exception& e) {
    Metadata err = md;
    err["cause"] = "rendezvous";
    if (waiting_for >= 0) err["peer_rank"] = absl::StrCat(waiting_for);
    return Error(Reason::kPeerUnavailable,
                 absl::StrCat("JoinGroup: group '", options.name, "' did not form",
                              waiting_for >= 0
                                  ? absl::StrCat(": rank ", waiting_for, " did not join within ",
                                                 config.timeout.count(), " ms")
                                  : "",
                              " (", e.what(), ")"),
                 err);
  }
}

}  // namespace tensord::distributed
