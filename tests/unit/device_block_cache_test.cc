// The device block cache against a fake driver: reuse by size class, idle release, the retry
// after an out-of-memory refusal, a limit below the driver's, and the stats the metrics read.
#include "server/core/device_block_cache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "server/core/status.h"

namespace tensord {
namespace {

// A driver with a memory limit, counting what it hands out.
struct FakeDriver {
  size_t limit = SIZE_MAX;
  size_t held = 0;
  int allocations = 0;
  int frees = 0;
  std::set<void*> live;

  DeviceBlockCache Cache() {
    return DeviceBlockCache(
        [this](size_t bytes) -> absl::StatusOr<void*> {
          if (held + bytes > limit) return Error(Reason::kOutOfMemory, "fake: out of memory");
          void* p = std::malloc(bytes);
          live.insert(p);
          held += bytes;
          ++allocations;
          return p;
        },
        [this](void* p, size_t bytes) {
          EXPECT_EQ(live.erase(p), 1u) << "freed a block the driver never gave";
          std::free(p);
          held -= bytes;
          ++frees;
        });
  }
};

TEST(DeviceBlockCache, BlockSizesHoldTheRequestWithAtMostAQuarterMore) {
  EXPECT_EQ(DeviceBlockCache::BlockSize(1), 512u);
  EXPECT_EQ(DeviceBlockCache::BlockSize(512), 512u);
  size_t previous = 0;
  for (size_t bytes = 513; bytes < (size_t{1} << 34); bytes = bytes * 9 / 7 + 11) {
    const size_t size = DeviceBlockCache::BlockSize(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_LE(size, bytes + bytes / 4) << bytes;
    EXPECT_GE(size, previous);
    EXPECT_EQ(DeviceBlockCache::BlockSize(size), size);
    previous = size;
  }
}

TEST(DeviceBlockCache, FreedBlocksAreReusedByTheirSizeClass) {
  FakeDriver driver;
  {
    DeviceBlockCache cache = driver.Cache();
    // A step: three tensors, two of one class.
    auto step = [&] {
      void* a = *cache.Allocate(1000);
      void* b = *cache.Allocate(1010);
      void* c = *cache.Allocate(70000);
      EXPECT_NE(a, b);
      cache.Free(a, 1000);
      cache.Free(b, 1010);
      cache.Free(c, 70000);
    };
    step();
    EXPECT_EQ(driver.allocations, 3);
    for (int i = 0; i < 5; ++i) step();
    EXPECT_EQ(driver.allocations, 3) << "a repeated step allocates nothing new";
    const DeviceBlockCache::Stats st = cache.GetStats();
    EXPECT_EQ(st.allocations, 3u);
    EXPECT_EQ(st.reuses, 15u);
    EXPECT_EQ(st.held_bytes, driver.held);
    EXPECT_EQ(st.cached_bytes, driver.held);
    EXPECT_EQ(DeviceBlockCache::TotalStats().held_bytes, driver.held);
    // Another class is a new block.
    void* d = *cache.Allocate(5000);
    EXPECT_EQ(driver.allocations, 4);
    cache.Free(d, 5000);
  }
  EXPECT_EQ(driver.held, 0u) << "the cache gives everything back when destroyed";
  EXPECT_TRUE(driver.live.empty());
}

TEST(DeviceBlockCache, IdleBlocksGoBackToTheDriver) {
  FakeDriver driver;
  DeviceBlockCache cache = driver.Cache();
  void* a = *cache.Allocate(4096);
  void* b = *cache.Allocate(4096);
  cache.Free(a, 4096);
  EXPECT_EQ(cache.ReleaseIdle(absl::Hours(1)), 0u) << "freed just now";
  EXPECT_EQ(DeviceBlockCache::ReleaseIdleEverywhere(absl::ZeroDuration()), 4096u);
  EXPECT_EQ(driver.frees, 1);
  EXPECT_EQ(cache.GetStats().cached_bytes, 0u);
  EXPECT_EQ(cache.GetStats().held_bytes, 4096u) << "b is still in use";
  cache.Free(b, 4096);
  EXPECT_EQ(cache.ReleaseAll(), 4096u);
  EXPECT_EQ(driver.held, 0u);
}

TEST(DeviceBlockCache, OutOfMemoryGivesTheCacheBackAndRetries) {
  FakeDriver driver;
  driver.limit = 8192;
  DeviceBlockCache cache = driver.Cache();
  void* a = *cache.Allocate(4096);
  void* b = *cache.Allocate(4096);
  cache.Free(a, 4096);
  cache.Free(b, 4096);
  // 8 KiB of another class: the driver refuses until the cached 4 KiB blocks are given back.
  auto big = cache.Allocate(8000);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(cache.GetStats().cached_bytes, 0u);
  EXPECT_EQ(driver.frees, 2);
  // Nothing left to give back: the driver's refusal is the answer.
  auto more = cache.Allocate(600);
  EXPECT_EQ(GetReason(more.status()), Reason::kOutOfMemory);
  cache.Free(*big, 8000);
}

TEST(DeviceBlockCache, ALimitRefusesLikeTheDriverAfterGivingTheCacheBack) {
  FakeDriver driver;
  DeviceBlockCache cache = driver.Cache();
  cache.set_limit(4096, "fake:0");
  void* a = cache.Allocate(2048).value();
  void* b = cache.Allocate(1024).value();
  cache.Free(b, 1024);  // cached: still held from the driver
  // 3,072 held: 1,536 more would pass the limit, so the cache gives its 1,024 back first.
  void* c = cache.Allocate(1536).value();
  EXPECT_EQ(driver.frees, 1);
  EXPECT_EQ(driver.held, 2048u + DeviceBlockCache::BlockSize(1536));
  absl::StatusOr<void*> d = cache.Allocate(1024);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(GetReason(d.status()), Reason::kOutOfMemory);
  EXPECT_NE(d.status().message().find("fake:0"), absl::string_view::npos) << d.status();
  EXPECT_EQ(driver.held, 2048u + DeviceBlockCache::BlockSize(1536))
      << "a refusal asks the driver for nothing";
  cache.Free(a, 2048);
  cache.Free(c, 1536);
  absl::StatusOr<void*> e = cache.Allocate(3000);
  ASSERT_TRUE(e.ok()) << "what was freed makes room: " << e.status();
  cache.Free(*e, 3000);
  cache.ReleaseAll();
  EXPECT_EQ(driver.held, 0u);
  EXPECT_TRUE(driver.live.empty());
}

}  // namespace
}  // namespace tensord
