// The random numbers of rand, randn, randint and dropout: SplitMix64 streams, the same on
// every platform and every backend for a given seed (the standard library's distributions
// are implementation-defined). Value k (from 1) of the stream starting at `start` is
// SplitMix64(start + k * kGolden), a function of (start, k) alone, so a GPU computes any value
// without the ones before it.
#pragma once

#include <cstdint>

#include "server/ops/attrs.h"

namespace tensord::ops {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;

inline uint64_t SplitMix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Value k of the stream from `start`.
inline uint64_t StreamValue(uint64_t start, uint64_t k) { return SplitMix64(start + k * kGolden); }

// Where a creation op's stream starts: its seed attribute, or a fresh start from a
// process-wide source (random_device once, then a counter, so concurrent calls never share a
// stream).
uint64_t StreamStart(const Attrs& attrs);

// Dropout's mask: element i is kept when value i + 1 of the stream from SplitMix64(seed) maps
// to a uniform value >= p. Pure in (seed, i), so a recomputed forward and the backward see the
// same mask regardless of threading, call order or device.
inline uint64_t DropoutStreamStart(int64_t seed) { return SplitMix64(static_cast<uint64_t>(seed)); }
inline bool DropoutKeep(uint64_t start, int64_t i, double p) {
  return static_cast<double>(StreamValue(start, static_cast<uint64_t>(i) + 1) >> 11) * 0x1.0p-53 >=
         p;
}

// randint's element i in [0, range): value i + 1 of the stream, unbiased by rejecting the
// short last bucket of 2^64 % range values. A rejected element redraws value i + 1 of the
// stream from SplitMix64(start + attempt), so every element stays a function of (start, i)
// alone (a device draws element i without the ones before it) and a rejection, rare unless
// range is near 2^63, moves no other element.
inline uint64_t RandintOffset(uint64_t start, int64_t i, uint64_t range) {
  const uint64_t reject_below = (0 - range) % range;
  const uint64_t k = static_cast<uint64_t>(i) + 1;
  uint64_t x = StreamValue(start, k);
  for (uint64_t attempt = 1; x < reject_below; ++attempt) {
    x = StreamValue(SplitMix64(start + attempt), k);
  }
  return x % range;
}

}  // namespace tensord::ops
