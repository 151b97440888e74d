#include "server/ops/random_stream.h"

#include <atomic>
#include <random>

namespace tensord::ops {

uint64_t StreamStart(const Attrs& attrs) {
  if (attrs.Has("seed")) return static_cast<uint64_t>(attrs.GetInt("seed"));
  static std::atomic<uint64_t> next{[] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }()};
  return StreamValue(next.fetch_add(1), 1);
}

}  // namespace tensord::ops
