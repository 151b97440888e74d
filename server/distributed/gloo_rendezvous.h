// Where the ranks of a Gloo group find each other: a store every rank reads and writes, named
// by a URI: "file:///shared/dir" (Gloo's file store: a directory on a file system every rank
// mounts) or "redis://host:port" (Gloo's Redis store). Keys live under the group's name, so
// one store serves many groups; a name must be new for each launch of a group, since the
// store keeps what an earlier launch wrote.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "gloo/rendezvous/store.h"

namespace tensord::distributed {

// A group's view of a store: its keys under the group's name, and every wait and get taking
// the server's collective timeout (Gloo's stores would wait 30 s).
class GroupStore : public gloo::rendezvous::Store {
 public:
  // Whether `key` is there now, without waiting.
  virtual bool Has(const std::string& key) = 0;
};

// INVALID_REQUEST for an unknown scheme or malformed URI; PEER_UNAVAILABLE
// (cause=rendezvous) when the store cannot be reached.
absl::StatusOr<std::unique_ptr<GroupStore>> OpenRendezvous(const std::string& uri,
                                                           const std::string& group,
                                                           std::chrono::milliseconds timeout);

}  // namespace tensord::distributed
