// Streams on an OpenCL device (server/core/stream_scope.h): each session's work runs on a queue
// of its own, so one stream's reads never wait for another stream's kernels, while a block that
// crosses streams (a tensor read from another stream, a freed block handed to another stream)
// is ordered after the work that named it last (tests/gpu/stream_order_checks.h). A stream's
// queue is held by a barrier on an event the test completes itself.
#include <CL/cl.h>

#include <memory>

#include "server/backends/opencl/opencl_runtime.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/stream_order_checks.h"

namespace tensord::testing {
namespace {

std::shared_ptr<opencl::ClDevice> OpenClDevice(const std::string& name) {
  for (const auto& d : opencl::Devices()) {
    if (d->name() == name) return d;
  }
  return nullptr;
}

// Holds the calling thread's stream queue until Release (or destruction).
class HeldQueue final : public HeldStream {
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
  ~HeldQueue() override { Release(); }
  void Release() override {
    if (event_ == nullptr) return;
    clSetUserEventStatus(event_, CL_COMPLETE);
    clReleaseEvent(event_);
    event_ = nullptr;
  }

 private:
  cl_event event_ = nullptr;
};

HoldCurrentStream Hold(const std::shared_ptr<opencl::ClDevice>& cl) {
  return [cl] { return std::make_unique<HeldQueue>(*cl); };
}

#define TENSORD_REQUIRE_OPENCL(device, cl)                     \
  TENSORD_REQUIRE_DEVICE(device);                              \
  std::shared_ptr<opencl::ClDevice> cl = OpenClDevice(device); \
  if (cl == nullptr) GTEST_SKIP() << device << " is not an OpenCL device"

TEST(DeviceStreams, AStreamReadsWhileAnotherStreamIsHeld) {
  TENSORD_REQUIRE_OPENCL(device, cl);
  CheckAStreamReadsWhileAnotherIsHeld(device, Hold(cl), /*warm=*/false);
}

TEST(DeviceStreams, ATensorReadFromAnotherStreamWaitsForItsWriter) {
  TENSORD_REQUIRE_OPENCL(device, cl);
  CheckATensorReadFromAnotherStreamWaitsForItsWriter(device, Hold(cl), /*warm=*/false);
}

TEST(DeviceStreams, ABlockFreedOnOneStreamIsWrittenByAnotherAfterItsReaders) {
  TENSORD_REQUIRE_OPENCL(device, cl);
  CheckABlockFreedOnOneStreamIsWrittenByAnotherAfterItsReaders(device, Hold(cl),
                                                               /*warm=*/false);
}

TEST(DeviceStreams, AnEndedStreamGivesItsQueueBack) {
  TENSORD_REQUIRE_OPENCL(device, cl);
  CheckAnEndedStreamGivesItsQueueBack(device, [cl] { return cl->stream_queues(); });
}

}  // namespace
}  // namespace tensord::testing
