#include "server/distributed/gloo_rendezvous.h"

#include <exception>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gloo/rendezvous/file_store.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/redis_store.h"
#include "server/core/status.h"

namespace tensord::distributed {
namespace {

// Gloo's file store keeps its check (a key is there now) protected; the Redis store's is public.
class FileStore : public gloo::rendezvous::FileStore {
 public:
  using gloo::rendezvous::FileStore::check;
  using gloo::rendezvous::FileStore::FileStore;
};
using Check = std::function<bool(const std::vector<std::string>&)>;

// Keys under the group's prefix, joined as Gloo's PrefixStore joins them ("<prefix>/<key>").
class PrefixedGroupStore : public GroupStore {
 public:
  PrefixedGroupStore(std::unique_ptr<gloo::rendezvous::Store> base, Check check,
                     const std::string& group, std::chrono::milliseconds timeout)
      : base_(std::move(base)),
        check_(std::move(check)),
        prefix_(absl::StrCat("tensord/", group)),
        prefixed_(prefix_, *base_),
        timeout_(timeout) {}

  bool Has(const std::string& key) override { return check_({absl::StrCat(prefix_, "/", key)}); }
  void set(const std::string& key, const std::vector<char>& data) override {
    prefixed_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override {
    prefixed_.wait({key}, timeout_);
    return prefixed_.get(key);
  }
  void wait(const std::vector<std::string>& keys) override { prefixed_.wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    prefixed_.wait(keys, timeout);
  }

 private:
  std::unique_ptr<gloo::rendezvous::Store> base_;
  Check check_;
  std::string prefix_;
  gloo::rendezvous::PrefixStore prefixed_;
  std::chrono::milliseconds timeout_;
};

absl::Status BadUri(const std::string& uri, absl::string_view why) {
  return Error(Reason::kInvalidRequest,
               absl::StrCat("JoinGroup: rendezvous '", uri, "' ", why,
                            "; use file:///shared/dir or redis://host:port"),
               {{"field", "rendezvous"}, {"value", uri}});
}

}  // namespace

absl::StatusOr<std::unique_ptr<GroupStore>> OpenRendezvous(const std::string& uri,
                                                           const std::string& group,
                                                           std::chrono::milliseconds timeout) {
  std::unique_ptr<gloo::rendezvous::Store> base;
  Check check;
  try {
    if (absl::StartsWith(uri, "file://")) {
      std::string path = uri.substr(7);
      if (path.empty() || path[0] != '/') return BadUri(uri, "needs an absolute path");
      auto file = std::make_unique<FileStore>(path);
      check = [store = file.get()](const std::vector<std::string>& keys) {
        return store->check(keys);
      };
      base = std::move(file);
    } else if (absl::StartsWith(uri, "redis://")) {
      std::string hostport = uri.substr(8);
      while (!hostport.empty() && hostport.back() == '/') hostport.pop_back();
      const size_t colon = hostport.rfind(':');
      int port = 6379;
      std::string host = hostport;
      if (colon != std::string::npos) {
        host = hostport.substr(0, colon);
        if (!absl::SimpleAtoi(hostport.substr(colon + 1), &port) || port <= 0 || port > 65535) {
          return BadUri(uri, "has a bad port");
        }
      }
      if (host.empty()) return BadUri(uri, "names no host");
      auto redis = std::make_unique<gloo::rendezvous::RedisStore>(host, port);
      check = [store = redis.get()](const std::vector<std::string>& keys) {
        return store->check(keys);
      };
      base = std::move(redis);
    } else {
      return BadUri(uri, "has an unknown scheme");
    }
  } catch (const std::exception& e) {
    return Error(
        Reason::kPeerUnavailable,
        absl::StrCat("JoinGroup: cannot open the rendezvous store '", uri, "': ", e.what()),
        {{"group", group}, {"cause", "rendezvous"}});
  }
  return std::make_unique<PrefixedGroupStore>(std::move(base), std::move(check), group, timeout);
}

}  // namespace tensord::distributed
