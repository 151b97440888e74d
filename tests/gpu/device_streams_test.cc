// Streams on a device (server/core/stream_scope.h): each session's work runs on a queue of its
// own, so one stream's reads never wait for another stream's kernels, while a block that
// crosses streams (a tensor read from another stream, a freed block handed to another
// stream) is ordered after the work that named it last. Stream A's queue is held by a barrier
// on an event the test completes itself, so "does not wait" and "waits" are seen
// deterministically: work that wrongly waited for A would never finish while A is held, and
// work that wrongly ran before A would read values A has not written yet.
#include <CL/cl.h>

#include <chrono>
#include <future>
#include <memory>

#include "server/backends/opencl/opencl_runtime.h"
#include "server/core/stream_scope.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

constexpr auto kLongEnough = std::chrono::seconds(60);
constexpr auto kWhileHeld = std::chrono::milliseconds(300);

std::shared_ptr<opencl::ClDevice> OpenClDevice(const std::string& name) {
  for (const auto& d : opencl::Devices()) {
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

// Holds the calling thread's stream queue until Release (or destruction).
class HeldQueue {
 public:
  explicit HeldQueue(opencl::ClDevice& device) {
    cl_command_queue queue = device.CurrentQueue().value();
    cl_context context = nullptr;
    clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof(context), &context, nullptr);
    cl_int err = CL_SUCCESS;
    event_ = clCreateUserEvent(context, &err);
    EXPECT_EQ(err, CL_SUCCESS);
    EXPECT_EQ(clEnqueueBarrierWithWaitList(queue, 1, &event_, nullptr), CL_SUCCESS);
  }
  ~HeldQueue() { Release(); }
  void Release() {
    if (event_ == nullptr) return;
    clSetUserEventStatus(event_, CL_COMPLETE);
    clReleaseEvent(event_);
    event_ = nullptr;
  }

 private:
  cl_event event_ = nullptr;
};

// Runs `work` on a thread of its own, on `stream`.
template <typename F>
auto OnStream(uint64_t stream, F work) {
  return std::async(std::launch::async, [stream, work] {
    StreamScope scope(stream);
    return work();
  });
}

#define TENSORD_REQUIRE_OPENCL(device, cl)                     \
  TENSORD_REQUIRE_DEVICE(device);                              \
  std::shared_ptr<opencl::ClDevice> cl = OpenClDevice(device); \
  if (cl == nullptr) GTEST_SKIP() << device << " runs every stream on one stream"

TEST(DeviceStreams, AStreamReadsWhileAnotherStreamIsHeld) {
  TENSORD_REQUIRE_OPENCL(device, cl);
  const uint64_t a = NewStream(), b = NewStream();
  const Tensor host = Random(DType::kF32, {1000}, 70, -3, 3);
  Tensor on_a;
  {
    StreamScope scope(a);
    const Tensor x = MoveTo(host, device);
    HeldQueue held(*cl);
    on_a = Call("neg", {x}, device);  // queued behind the held barrier
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

TEST(DeviceStreams, ATensorReadFromAnotherStreamWaitsForItsWriter) {
  TENSORD_REQUIRE_OPENCL(device, cl);
  const uint64_t a = NewStream(), b = NewStream();
  const Tensor host = Random(DType::kF32, {4099}, 71, -3, 3);
  StreamScope scope(a);
  const Tensor x = MoveTo(host, device);
  HeldQueue held(*cl);
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

TEST(DeviceStreams, ABlockFreedOnOneStreamIsWrittenByAnotherAfterItsReaders) {
  TENSORD_REQUIRE_OPENCL(device, cl);
  const uint64_t a = NewStream(), b = NewStream();
  const Tensor first = Random(DType::kF32, {12347}, 72, -3, 3);
  const Tensor second = Random(DType::kF32, {12347}, 73, 10, 20);
  StreamScope scope(a);
  Tensor x = MoveTo(first, device);
  HeldQueue held(*cl);
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

TEST(DeviceStreams, AnEndedStreamGivesItsQueueBack) {
  TENSORD_REQUIRE_OPENCL(device, cl);
  const size_t before = cl->stream_queues();
  const uint64_t a = NewStream();
  const Tensor host = Random(DType::kF32, {64}, 74, -3, 3);
  Tensor y;
  {
    StreamScope scope(a);
    y = Call("neg", {MoveTo(host, device)}, device);
  }
  EXPECT_EQ(cl->stream_queues(), before + 1);
  EndStream(a);  // finishes a's work first
  EXPECT_EQ(cl->stream_queues(), before);
  // y's block was named last by a stream that ended: the default stream reads it at once.
  EXPECT_TRUE(SameBytes(MoveTo(y, "cpu"), Call("neg", {host}, kHostDevice)));
}

}  // namespace
}  // namespace tensord::testing
