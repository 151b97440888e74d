// Process groups: N tensord servers whose sessions run collectives (all_reduce, all_gather,
// reduce_scatter, broadcast, reduce, barrier) together. A session joins at most one group
// (JoinGroup); the dispatcher hands every collective op of that session to the group, which
// first agrees with its peers on what runs (collective_agreement.h) and then moves the data:
// in host memory with its own library (Gloo), or on the device with the device's library
// (device_collectives.h: NCCL), whose communicators it makes when the ranks need them. The
// dispatcher stages the tensors of a device without one through host memory. No library
// header here: the libraries stay below this interface.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/core/device_collectives.h"
#include "server/core/tensor.h"
#include "server/ops/op_def.h"

namespace tensord::distributed {

// What a server is configured with (flags --collective-timeout, --collective-address).
struct CollectiveConfig {
  // How long a rank waits for its peers: at JoinGroup, and in every collective.
  std::chrono::milliseconds timeout{60000};
  // The address peers reach this server's collectives at (a host name or IP address of this
  // machine); empty: the machine's host name.
  std::string address;
  // When not empty, a rendezvous URI must start with one of these (a file store writes files
  // into the directory it names, a Redis store makes the server connect where it says).
  std::vector<std::string> rendezvous_prefixes;
};

// The most ranks a group may have (a full mesh: each rank connects to every other).
inline constexpr int kMaxWorldSize = 4096;

struct GroupOptions {
  std::string name;
  int rank = 0;
  int world_size = 1;
  // Where the ranks find each other: "file:///shared/dir" (a directory every rank can
  // read and write) or "redis://host:port".
  std::string rendezvous;
};

// One collective call, as the dispatcher resolved it.
struct CollectiveCall {
  const OpDef& op;
  const Attrs& attrs;
  // In host memory when `refusal` is OK, or on `device` when `library` moves them there.
  const std::vector<Tensor>& inputs;
  std::vector<Tensor>& outputs;  // allocated; empty when refused
  std::string device;            // where the caller's tensors are
  // This rank's own refusal (autodiff, device, dtype, shape, quota): the call still meets
  // the peers, so every rank fails with it.
  absl::Status refusal;
  // What the call is part of, agreed on with the attributes (a gradient bucket names its
  // place: "gradient bucket 2 of 5"); empty for an op a client called.
  std::string tag;
  // The collectives library of `device` that moves the tensors (every rank must use the same),
  // or null: they are in host memory and the group's own library moves them.
  DeviceCollectives* library = nullptr;
};

class ProcessGroup {
 public:
  ProcessGroup(GroupOptions options) : options_(std::move(options)) {}
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const std::string& name() const { return options_.name; }
  int rank() const { return options_.rank; }
  int size() const { return options_.world_size; }
  const GroupOptions& options() const { return options_; }
  // The communication library ("gloo").
  virtual std::string backend() const = 0;

  // Agrees with every rank, then runs. On the refusal of any rank, or calls that differ,
  // every rank fails alike and the group stays usable. A rank that does not take part within
  // the timeout, or a connection that breaks, is PEER_UNAVAILABLE and breaks the group: every
  // later call fails at once with PEER_UNAVAILABLE (cause=broken) until the session joins a
  // group again.
  virtual absl::Status Run(const CollectiveCall& call) = 0;

  // Makes a call waiting for its peers fail now (the session is closing). Thread-safe; the
  // group is broken afterwards.
  virtual void Abort() = 0;

 private:
  const GroupOptions options_;
};

// Joins the group: blocks until every rank has joined (or the timeout: PEER_UNAVAILABLE,
// cause=rendezvous). INVALID_REQUEST for bad options or an unknown rendezvous scheme.
absl::StatusOr<std::shared_ptr<ProcessGroup>> JoinGroup(const GroupOptions& options,
                                                        const CollectiveConfig& config);

}  // namespace tensord::distributed
