// Streams on a CUDA device (server/core/stream_scope.h), as device_streams_test checks them on
// OpenCL: each session's work runs on a CUDA stream of its own, so one stream's reads never wait
// for another stream's kernels, while a block that crosses streams is ordered after the work
// that named it last (a CUDA event). Stream A is held by a host function that waits for the
// test, so "does not wait" and "waits" are seen deterministically. Every op is run once before
// a stream is held, so that no kernel is loaded and no block allocated from the driver while
// it is (CUDA may synchronize those with every stream).
#include <cuda_runtime_api.h>

#include <chrono>
#include <future>
#include <memory>

#include "server/backends/cuda/cuda_runtime.h"
#include "server/core/stream_scope.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

constexpr auto kLongEnough = std::chrono::seconds(60);
constexpr auto kWhileHeld = std::chrono::milliseconds(300);

std::shared_ptr<cuda::CudaDevice> CudaDevice(const std::string& name) {
  for (const auto& d : cuda::Devices()) {
    if (d->name() == name) return d;
  }
  return nullptr;
}

Tensor Call(const std::string& op, const std::vector<Tensor>& inputs, const std::string& device) {
  CallEnv env;
  env.no_grad = true;
  env.device = device;
  auto out = DeviceDispatcher().Call(op, inputs, {}, env);
  EXPECT_TRUE(out.ok()) << op << ": " << out.status();
  return out.ok() ? (*out)[0] : Tensor();
}

// Holds the calling thread's CUDA stream until Release (or destruction): a host function
// enqueued on it waits for the release, and the work queued behind it waits with it.
class HeldStream {
 public:
  explicit HeldStream(cuda::CudaDevice& device) {
    cudaStream_t stream = device.CurrentStream().value();
    // The host function may run after this object is gone: it owns its copy of the future.
    auto* released = new std::shared_future<void>(release_.get_future().share());
    EXPECT_EQ(cudaLaunchHostFunc(stream, &HeldStream::Hold, released), cudaSuccess);
  }
  ~HeldStream() { Release(); }
  void Release() {
    if (held_) release_.set_value();
    held_ = false;
  }

 private:
  static void Hold(void* released) {
    auto* future = static_cast<std::shared_future<void>*>(released);
    future->wait();
    delete future;
  }
  std::promise<void> release_;
  bool held_ = true;
};

// Runs `work` on a thread of its own, on `stream`.
template <typename F>
auto OnStream(uint64_t stream, F work) {
  return std::async(std::launch::async, [stream, work] {
    StreamScope scope(stream);
    return work();
  });
}

#define TENSORD_REQUIRE_CUDA(device, cu)                     \
  TENSORD_REQUIRE_DEVICE(device);                            \
  std::shared_ptr<cuda::CudaDevice> cu = CudaDevice(device); \
  if (cu == nullptr) GTEST_SKIP() << device << " is not a CUDA device"

TEST(CudaStreams, AStreamReadsWhileAnotherStreamIsHeld) {
  TENSORD_REQUIRE_CUDA(device, cu);
  const uint64_t a = NewStream(), b = NewStream();
  const Tensor host = Random(DType::kF32, {1000}, 70, -3, 3);
  for (uint64_t s : {a, b}) {  // kernels loaded and blocks cached on both streams
    OnStream(s, [&] { return MoveTo(Call("exp", {MoveTo(host, device)}, device), "cpu"); }).get();
    OnStream(s, [&] { return MoveTo(Call("neg", {MoveTo(host, device)}, device), "cpu"); }).get();
  }
  {
    StreamScope scope(a);
    const Tensor x = MoveTo(host, device);
    HeldStream held(*cu);
    const Tensor on_a = Call("neg", {x}, device);  // queued behind the held host function
    auto read =
        OnStream(b, [&] { return MoveTo(Call("exp", {MoveTo(host, device)}, device), "cpu"); });
    const bool done = read.wait_for(kLongEnough) == std::future_status::ready;
    held.Release();  // before a failed check returns: `read` would wait for a
    ASSERT_TRUE(done) << "stream b waited for stream a";
    EXPECT_TRUE(AllClose(read.get(), Call("exp", {host}, kHostDevice), 2e-5, 1e-5));
    EXPECT_TRUE(SameBytes(MoveTo(on_a, "cpu"), Call("neg", {host}, kHostDevice)));
  }
  EndStream(a);
  EndStream(b);
}

TEST(CudaStreams, ATensorReadFromAnotherStreamWaitsForItsWriter) {
  TENSORD_REQUIRE_CUDA(device, cu);
  const uint64_t a = NewStream(), b = NewStream();
  const Tensor host = Random(DType::kF32, {4099}, 71, -3, 3);
  OnStream(a, [&] { return MoveTo(Call("neg", {MoveTo(host, device)}, device), "cpu"); }).get();
  OnStream(b, [&] { return MoveTo(MoveTo(host, device), "cpu"); }).get();
  StreamScope scope(a);
  const Tensor x = MoveTo(host, device);
  HeldStream held(*cu);
  const Tensor y = Call("neg", {x}, device);  // written once a is released
  auto read = OnStream(b, [&] { return MoveTo(y, "cpu"); });
  EXPECT_EQ(read.wait_for(kWhileHeld), std::future_status::timeout)
      << "stream b read y before stream a wrote it";
  held.Release();
  ASSERT_EQ(read.wait_for(kLongEnough), std::future_status::ready);
  EXPECT_TRUE(SameBytes(read.get(), Call("neg", {host}, kHostDevice)));
  EndStream(a);
  EndStream(b);
}

TEST(CudaStreams, ABlockFreedOnOneStreamIsWrittenByAnotherAfterItsReaders) {
  TENSORD_REQUIRE_CUDA(device, cu);
  const uint64_t a = NewStream(), b = NewStream();
  const Tensor first = Random(DType::kF32, {12347}, 72, -3, 3);
  const Tensor second = Random(DType::kF32, {12347}, 73, 10, 20);
  OnStream(a, [&] { return MoveTo(Call("neg", {MoveTo(first, device)}, device), "cpu"); }).get();
  StreamScope scope(a);
  Tensor x = MoveTo(first, device);
  HeldStream held(*cu);
  const Tensor y = Call("neg", {x}, device);  // reads x once a is released
  x = Tensor();                               // x's block goes back to the cache
  // The same size class: b is handed x's block, and must not write it before a's neg read it.
  auto write = OnStream(b, [&] { return MoveTo(second, device); });
  EXPECT_EQ(write.wait_for(kWhileHeld), std::future_status::timeout)
      << "stream b wrote a block stream a still reads";
  held.Release();
  ASSERT_EQ(write.wait_for(kLongEnough), std::future_status::ready);
  const Tensor written = write.get();
  EXPECT_TRUE(SameBytes(MoveTo(y, "cpu"), Call("neg", {first}, kHostDevice)));
  EXPECT_TRUE(SameBytes(MoveTo(written, "cpu"), second));
  EndStream(a);
  EndStream(b);
}

TEST(CudaStreams, AnEndedStreamGivesItsCudaStreamBack) {
  TENSORD_REQUIRE_CUDA(device, cu);
  const size_t before = cu->stream_count();
  const uint64_t a = NewStream();
  const Tensor host = Random(DType::kF32, {64}, 74, -3, 3);
  Tensor y;
  {
    StreamScope scope(a);
    y = Call("neg", {MoveTo(host, device)}, device);
  }
  EXPECT_EQ(cu->stream_count(), before + 1);
  EndStream(a);  // finishes a's work first
  EXPECT_EQ(cu->stream_count(), before);
  // y's block was named last by a stream that ended: the default stream reads it at once.
  EXPECT_TRUE(SameBytes(MoveTo(y, "cpu"), Call("neg", {host}, kHostDevice)));
}

}  // namespace
}  // namespace tensord::testing
