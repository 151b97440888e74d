// The oneDNN primitive cache (server/backends/cpu/onednn_primitive_cache.cc), sharded: the
// capacity bounds the entries of all shards together, the least recently used of all go first,
// and threads looking up and building at once share one primitive per key.
// (onednn_kernels_test.cc: PrimitiveCacheEvictsLeastRecentlyUsed at the default capacity.)
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/cpu/onednn_common.h"
#include "tests/unit/onednn_test_util.h"

namespace tensord {
namespace {

using cpu::onednn::CachedPrimitive;
using cpu::onednn::GetCachedPrimitive;
using cpu::onednn::GetCacheStats;

using testing::ReluPrimitive;

// Looks `key` up, building relu(n); returns whether the lookup was a hit.
bool Hit(const std::string& key, int64_t n = 8) {
  const int64_t hits = GetCacheStats().hits;
  EXPECT_NE(GetCachedPrimitive(key, [n] { return ReluPrimitive(n); }), nullptr);
  return GetCacheStats().hits > hits;
}

class PrimitiveCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { cpu::onednn::ClearCache(); }
  void TearDown() override {
    cpu::onednn::SetCacheCapacity(cpu::onednn::kDefaultCacheCapacity);
    cpu::onednn::ClearCache();
  }
};

TEST_F(PrimitiveCacheTest, TheLeastRecentlyUsedOfAllShardsGoesFirst) {
  cpu::onednn::SetCacheCapacity(3);
  EXPECT_FALSE(Hit("a"));
  EXPECT_FALSE(Hit("b"));
  EXPECT_FALSE(Hit("c"));
  EXPECT_TRUE(Hit("a"));   // a is now the most recently used
  EXPECT_FALSE(Hit("d"));  // evicts b, the least recently used
  EXPECT_EQ(GetCacheStats().size, 3);
  EXPECT_EQ(GetCacheStats().capacity, 3);
  EXPECT_TRUE(Hit("a"));
  EXPECT_TRUE(Hit("c"));
  EXPECT_TRUE(Hit("d"));
  EXPECT_FALSE(Hit("b"));
  cpu::onednn::SetCacheCapacity(0);
  EXPECT_EQ(GetCacheStats().size, 0);
  EXPECT_FALSE(Hit("a"));
  EXPECT_EQ(GetCacheStats().size, 0) << "capacity 0 caches nothing";
}

TEST_F(PrimitiveCacheTest, TheCapacityBoundsAllShardsTogether) {
  cpu::onednn::SetCacheCapacity(300);
  for (int i = 0; i < 600; ++i) {
    const std::string key = absl::StrCat("key", i);
    EXPECT_FALSE(Hit(key)) << key;
    EXPECT_TRUE(Hit(key)) << "a primitive just built is found: " << key;
    // Keep key0 in use: it outlives 599 others whichever shards they fall in.
    EXPECT_TRUE(Hit("key0"));
  }
  EXPECT_EQ(GetCacheStats().size, 300);
  for (int i = 600 - 299; i < 600; ++i) EXPECT_TRUE(Hit(absl::StrCat("key", i))) << i;
  EXPECT_FALSE(Hit("key300")) << "the oldest of the rest was evicted";
  // Shrinking evicts at once, oldest first.
  cpu::onednn::SetCacheCapacity(2);
  EXPECT_EQ(GetCacheStats().size, 2);
  EXPECT_TRUE(Hit("key300"));
  EXPECT_TRUE(Hit("key599"));
}

TEST_F(PrimitiveCacheTest, ThreadsShareOnePrimitivePerKey) {
  constexpr int kThreads = 4, kKeys = 40;
  std::vector<std::vector<const CachedPrimitive*>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &seen] {
      for (int k = 0; k < kKeys; ++k) {
        auto p =
            GetCachedPrimitive(absl::StrCat("shared", k), [k] { return ReluPrimitive(k + 1); });
        seen[t].push_back(p.get());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int k = 0; k < kKeys; ++k) {
    auto p = GetCachedPrimitive(absl::StrCat("shared", k), [] { return ReluPrimitive(1); });
    EXPECT_EQ(p->pd.src_desc().get_size(), static_cast<size_t>((k + 1) * 4)) << k;
    for (int t = 0; t < kThreads; ++t) {
      // A thread that built its own while another inserted first received the kept one.
      EXPECT_EQ(seen[t][k], p.get()) << "thread " << t << " key " << k;
    }
  }
}

}  // namespace
}  // namespace tensord
