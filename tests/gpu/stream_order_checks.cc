#include "tests/gpu/stream_order_checks.h"

#include <chrono>
#include <future>

#include "server/core/stream_scope.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

constexpr auto kLongEnough = std::chrono::seconds(60);
constexpr auto kWhileHeld = std::chrono::milliseconds(300);

Tensor Call(const std::string& op, const std::vector<Tensor>& inputs, const std::string& device) {
  CallEnv env;
  env.no_grad = true;
  env.device = device;
  auto out = DeviceDispatcher().Call(op, inputs, {}, env);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

// Runs `work` on a thread of its own, on `stream`.
template <typename F>
auto OnStream(uint64_t stream, F work) {
  return std::async(std::launch::async, [stream, work] {
    StreamScope scope(stream);
    return work();
  });
}

// `op` of `host` moved to `device`, back on the host, on `stream` (kernels loaded, blocks
// cached there).
void Warm(uint64_t stream, const std::string& op, const Tensor& host, const std::string& device) {
  OnStream(stream, [&] { return MoveTo(Call(op, {MoveTo(host, device)}, device), "cpu"); }).get();
}

}  // namespace

void CheckAStreamReadsWhileAnotherIsHeld(const std::string& device, const HoldCurrentStream& hold,
                                         bool warm) {
  const uint64_t a = NewStream(), b = NewStream();
  const Tensor host = Random(DType::kF32, {1000}, 70, -3, 3);
  for (uint64_t s : {a, b}) {
    if (!warm) break;
    Warm(s, "exp", host, device);
    Warm(s, "neg", host, device);
  }
  {
    StreamScope scope(a);
    const Tensor x = MoveTo(host, device);
    std::unique_ptr<HeldStream> held = hold();
    const Tensor on_a = Call("neg", {x}, device);  // queued behind what holds a
    auto read =
        OnStream(b, [&] { return MoveTo(Call("exp", {MoveTo(host, device)}, device), "cpu"); });
    const bool done = read.wait_for(kLongEnough) == std::future_status::ready;
    held->Release();  // before a failed check returns: `read` would wait for a
    ASSERT_TRUE(done) << "stream b waited for stream a";
    EXPECT_TRUE(AllClose(read.get(), Call("exp", {host}, kHostDevice), 2e-5, 1e-5));
    EXPECT_TRUE(SameBytes(MoveTo(on_a, "cpu"), Call("neg", {host}, kHostDevice)));
  }
  EndStream(a);
  EndStream(b);
}

void CheckATensorReadFromAnotherStreamWaitsForItsWriter(const std::string& device,
                                                        const HoldCurrentStream& hold, bool warm) {
  const uint64_t a = NewStream(), b = NewStream();
  const Tensor host = Random(DType::kF32, {4099}, 71, -3, 3);
  if (warm) {
    Warm(a, "neg", host, device);
    OnStream(b, [&] { return MoveTo(MoveTo(host, device), "cpu"); }).get();
  }
  StreamScope scope(a);
  const Tensor x = MoveTo(host, device);
  std::unique_ptr<HeldStream> held = hold();
  const Tensor y = Call("neg", {x}, device);  // written once a is released
  auto read = OnStream(b, [&] { return MoveTo(y, "cpu"); });
  EXPECT_EQ(read.wait_for(kWhileHeld), std::future_status::timeout)
      << "stream b read y before stream a wrote it";
  held->Release();
  ASSERT_EQ(read.wait_for(kLongEnough), std::future_status::ready);
  EXPECT_TRUE(SameBytes(read.get(), Call("neg", {host}, kHostDevice)));
  EndStream(a);
  EndStream(b);
}

void CheckABlockFreedOnOneStreamIsWrittenByAnotherAfterItsReaders(const std::string& device,
                                                                  const HoldCurrentStream& hold,
                                                                  bool warm) {
  const uint64_t a = NewStream(), b = NewStream();
  const Tensor first = Random(DType::kF32, {12347}, 72, -3, 3);
  const Tensor second = Random(DType::kF32, {12347}, 73, 10, 20);
  if (warm) Warm(a, "neg", first, device);
  StreamScope scope(a);
  Tensor x = MoveTo(first, device);
  std::unique_ptr<HeldStream> held = hold();
  const Tensor y = Call("neg", {x}, device);  // reads x once a is released
  x = Tensor();                               // x's block goes back to the cache
  // The same size class: b is handed x's block, and must not write it before a's neg read it.
  auto write = OnStream(b, [&] { return MoveTo(second, device); });
  EXPECT_EQ(write.wait_for(kWhileHeld), std::future_status::timeout)
      << "stream b wrote a block stream a still reads";
  held->Release();
  ASSERT_EQ(write.wait_for(kLongEnough), std::future_status::ready);
  const Tensor written = write.get();
  EXPECT_TRUE(SameBytes(MoveTo(y, "cpu"), Call("neg", {first}, kHostDevice)));
  EXPECT_TRUE(SameBytes(MoveTo(written, "cpu"), second));
  EndStream(a);
  EndStream(b);
}

void CheckAnEndedStreamGivesItsQueueBack(const std::string& device,
                                         const std::function<size_t()>& queues) {
  const size_t before = queues();
  const uint64_t a = NewStream();
  const Tensor host = Random(DType::kF32, {64}, 74, -3, 3);
  Tensor y;
  {
    StreamScope scope(a);
    y = Call("neg", {MoveTo(host, device)}, device);
  }
  EXPECT_EQ(queues(), before + 1);
  EndStream(a);  // finishes a's work first
  EXPECT_EQ(queues(), before);
  // y's block was named last by a stream that ended: the default stream reads it at once.
  EXPECT_TRUE(SameBytes(MoveTo(y, "cpu"), Call("neg", {host}, kHostDevice)));
}

}  // namespace tensord::testing
