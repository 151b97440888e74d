// Streams on a CUDA device (server/core/stream_scope.h), with the checks device_streams_test
// runs on OpenCL (tests/gpu/stream_order_checks.h): each session's work runs on a CUDA stream
// of its own, and a block that crosses streams is ordered after the work that named it last (a
// CUDA event). A stream is held by a host function that waits for the test. Every op is run
// once before a stream is held (`warm`), so that no kernel is loaded and no block allocated
// from the driver while it is (CUDA may synchronize those with every stream).
#include <cuda_runtime_api.h>

#include <future>
#include <memory>

#include "server/backends/cuda/cuda_runtime.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/stream_order_checks.h"

namespace tensord::testing {
namespace {

std::shared_ptr<cuda::CudaDevice> CudaDevice(const std::string& name) {
  for (const auto& d : cuda::Devices()) {
    if (d->name() == name) return d;
  }
  return nullptr;
}

// Holds the calling thread's CUDA stream until Release (or destruction): a host function
// enqueued on it waits for the release, and the work queued behind it waits with it.
class HeldCudaStream final : public HeldStream {
 public:
  explicit HeldCudaStream(cuda::CudaDevice& device) {
    cudaStream_t stream = device.CurrentStream().value();
    // The host function may run after this object is gone: it owns its copy of the future.
    auto* released = new std::shared_future<void>(release_.get_future().share());
    EXPECT_EQ(cudaLaunchHostFunc(stream, &HeldCudaStream::Hold, released), cudaSuccess);
  }
  ~HeldCudaStream() override { Release(); }
  void Release() override {
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

HoldCurrentStream Hold(const std::shared_ptr<cuda::CudaDevice>& cu) {
  return [cu] { return std::make_unique<HeldCudaStream>(*cu); };
}

#define TENSORD_REQUIRE_CUDA(device, cu)                     \
  TENSORD_REQUIRE_DEVICE(device);                            \
  std::shared_ptr<cuda::CudaDevice> cu = CudaDevice(device); \
  if (cu == nullptr) GTEST_SKIP() << device << " is not a CUDA device"

TEST(CudaStreams, AStreamReadsWhileAnotherStreamIsHeld) {
  TENSORD_REQUIRE_CUDA(device, cu);
  CheckAStreamReadsWhileAnotherIsHeld(device, Hold(cu), /*warm=*/true);
}

TEST(CudaStreams, ATensorReadFromAnotherStreamWaitsForItsWriter) {
  TENSORD_REQUIRE_CUDA(device, cu);
  CheckATensorReadFromAnotherStreamWaitsForItsWriter(device, Hold(cu), /*warm=*/true);
}

TEST(CudaStreams, ABlockFreedOnOneStreamIsWrittenByAnotherAfterItsReaders) {
  TENSORD_REQUIRE_CUDA(device, cu);
  CheckABlockFreedOnOneStreamIsWrittenByAnotherAfterItsReaders(device, Hold(cu), /*warm=*/true);
}

TEST(CudaStreams, AnEndedStreamGivesItsCudaStreamBack) {
  TENSORD_REQUIRE_CUDA(device, cu);
  CheckAnEndedStreamGivesItsQueueBack(device, [cu] { return cu->stream_count(); });
}

}  // namespace
}  // namespace tensord::testing
