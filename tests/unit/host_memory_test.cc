// The host memory pool behind tensor storage: size classes, reuse of freed blocks, and blocks
// handed back to the system once idle.
#include "server/core/host_memory.h"

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace tensord::host_memory {
namespace {

TEST(HostMemory, SizeClassesHoldTheRequestWithAtMostAQuarterMore) {
  EXPECT_EQ(SizeClass(1), kPooledBytes);
  EXPECT_EQ(SizeClass(kPooledBytes), kPooledBytes);
  size_t previous = 0;
  for (size_t bytes = kPooledBytes; bytes < (size_t{1} << 34); bytes = bytes * 9 / 7 + 4097) {
    const size_t size = SizeClass(bytes);
    EXPECT_GE(size, bytes);
    EXPECT_LE(size, bytes + bytes / 4) << bytes;
    EXPECT_EQ(size % (size_t{16} << 10), 0u) << bytes;  // whole pages
    EXPECT_GE(size, previous);
    EXPECT_EQ(SizeClass(size), size);  // a class is its own class
    previous = size;
  }
}

TEST(HostMemory, BlocksAreAlignedAndWritableAtEverySize) {
  for (size_t bytes :
       {size_t{0}, size_t{1}, size_t{100}, kPooledBytes - 1, kPooledBytes, size_t{3} << 20}) {
    void* p = Allocate(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xab, bytes);
    Free(p, bytes);
  }
}

TEST(HostMemory, FreedBlocksAreReusedAndIdleOnesReleased) {
  if (!Pooled()) GTEST_SKIP() << "a sanitizer build mallocs every block, so that it sees them";
  ReleaseAll();
  const size_t bytes = (size_t{5} << 20) + 123;
  const Stats start = GetStats();
  void* a = Allocate(bytes);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(GetStats().maps, start.maps + 1);
  EXPECT_EQ(GetStats().mapped_bytes, start.mapped_bytes + SizeClass(bytes));
  Free(a, bytes);
  EXPECT_EQ(GetStats().cached_bytes, SizeClass(bytes));
  // A request of the same class takes the cached block: no new pages.
  void* b = Allocate(bytes - 100);
  EXPECT_EQ(b, a);
  EXPECT_EQ(GetStats().reuses, start.reuses + 1);
  EXPECT_EQ(GetStats().cached_bytes, 0u);
  Free(b, bytes - 100);
  // Recently freed blocks stay for reuse; idle ones go back to the system.
  EXPECT_EQ(ReleaseIdle(absl::Hours(1)), 0u);
  EXPECT_EQ(ReleaseIdle(absl::ZeroDuration()), SizeClass(bytes));
  EXPECT_EQ(GetStats().cached_bytes, 0u);
  EXPECT_EQ(GetStats().mapped_bytes, start.mapped_bytes);
}

TEST(HostMemory, SmallBlocksAreNotPooled) {
  const Stats start = GetStats();
  void* p = Allocate(kPooledBytes - 64);
  Free(p, kPooledBytes - 64);
  EXPECT_EQ(GetStats().maps, start.maps);
  EXPECT_EQ(GetStats().cached_bytes, start.cached_bytes);
}

}  // namespace
}  // namespace tensord::host_memory
