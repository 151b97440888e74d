// The CUDA runtime of the GPU layer: the devices found (cuda:0, cuda:1, ... in CUDA's order),
// a non-blocking CUDA stream per tensord stream (stream_scope.h: each session's calls run on a
// stream of their own, ordered against the others where a block crosses them, through CUDA
// events), blocks through the device block cache (cudaMalloc), kernels
// rendered in the CUDA dialect and compiled by NVRTC for the device's architecture (cached in
// memory and on disk), cuBLASLt's GEMM, cuDNN's convolutions. Only the CUDA runtime API (linked
// statically) and the libraries of cuda_libraries.h: no driver API, so the binary starts without
// libcuda.so.1.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/backends/cuda/cudnn_convolution.h"
#include "server/backends/gpu/device_runtime.h"
#include "server/backends/gpu/stream_queues.h"
#include "server/core/device_block_cache.h"
#include "server/core/device_stream_order.h"

namespace tensord::cuda {

// A CUDA error as a status: OUT_OF_MEMORY for allocation failures, INTERNAL otherwise, naming
// what failed and the error.
absl::Status CudaError(cudaError_t err, const std::string& what, const std::string& device);

struct CudaKernel : gpu::CompiledKernel {
  cudaLibrary_t library = nullptr;
  cudaKernel_t kernel = nullptr;
  std::string name;
};

class CudaDevice : public gpu::DeviceRuntime {
 public:
  CudaDevice(std::string name, int ordinal);
  ~CudaDevice() override;
  // Reads the device's properties and makes its default stream; the device is unusable when it
  // fails.
  absl::Status Open();

  const std::string& name() const override { return name_; }
  bool native_fp64() const override { return true; }
  const gpu::Dialect& dialect() const override;
  const std::string& description() const { return description_; }
  int64_t memory_bytes() const { return memory_bytes_; }

  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* block, size_t bytes) override;
  absl::StatusOr<gpu::CompiledKernel*> Kernel(
      const std::string& key, const std::string& name,
      const std::function<std::string(const gpu::Dialect&)>& render) override;
  absl::Status Launch(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args, int64_t n) override;
  absl::Status LaunchGroups(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args,
                            int64_t groups, int size) override;
  int max_group_size() const override { return 1024; }
  bool runs_on_host_cores() const override { return false; }
  absl::Status Write(void* block, size_t offset, const void* src, size_t bytes) override;
  absl::Status Read(const void* block, size_t offset, void* dst, size_t bytes) override;
  absl::Status CopyOnDevice(const void* src, void* dst, size_t bytes) override;
  absl::StatusOr<const void*> Constants(const std::vector<int64_t>& values) override;
  void ReleaseConstants(const void* block) override;
  bool GemmTakes(DType dtype) const override;
  bool GemmAddsBias() const override { return true; }
  absl::Status Gemm(const gpu::GemmShape& shape, const void* a, const void* b, void* c,
                    const void* bias) override;
  // cuDNN's (cudnn_convolution.h), loaded at the first convolution; none without it.
  absl::StatusOr<std::optional<size_t>> ConvolutionWorkspace(const gpu::ConvolutionShape& shape,
                                                             size_t max_workspace) override;
  absl::Status Convolution(const gpu::ConvolutionShape& shape, const void* a, const void* b,
                           void* out, void* workspace, size_t workspace_bytes) override;
  // Waits for the work of every stream.
  absl::Status Synchronize() override;

  // The CUDA stream of the calling thread's tensord stream (the device's default stream outside
  // any StreamScope), made on first use. Tests hold it to see what waits for what.
  absl::StatusOr<cudaStream_t> CurrentStream();
  // CUDA streams made for tensord streams that have not ended.
  size_t stream_count() const;
  // The calling thread's CUDA stream, with this device current, ordered after the streams that
  // named `blocks` last: where a library's work on those blocks (NCCL's) is enqueued.
  absl::StatusOr<cudaStream_t> StreamAfter(absl::Span<const void* const> blocks);
  // NCCL (nccl_collectives.h), loaded on first use; null without it.
  DeviceCollectives* collectives() override;

 private:
  // Makes this device current on the calling thread; fails once a sticky error took the
  // device out of service.
  absl::Status Enter();
  // cuDNN's convolutions, made at the first call; null without cuDNN.
  CudnnConvolutions* cudnn();
  // `err` as a status; an error that leaves the context unusable takes the device out of
  // service (every later call fails at once, the server and other devices go on).
  absl::Status Check(cudaError_t err, const std::string& what);
  absl::Status Enqueue(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args, unsigned grid,
                       unsigned block);
  // The CUDA stream of tensord stream `stream`; the device must be current.
  absl::StatusOr<cudaStream_t> StreamOf(uint64_t stream);
  // The calling thread's CUDA stream, ordered after the streams that named `blocks` last.
  absl::StatusOr<cudaStream_t> StreamFor(absl::Span<const void* const> blocks);
  // Makes `to` wait for what `from` enqueued so far (an event), without blocking the host.
  absl::Status Wait(uint64_t from, uint64_t to);
  // Finishes the work of an ended stream and destroys its CUDA stream.
  void EndStream(uint64_t stream);
  // The CUBIN of `source` for this device: the disk cache's, or NVRTC's (then stored there);
  // `fresh`: NVRTC's, replacing the cache's.
  absl::StatusOr<std::string> Cubin(const std::string& name, const std::string& source, bool fresh);

  const std::string name_;
  const int ordinal_;
  std::string description_, arch_;
  int64_t memory_bytes_ = 0;
  cudaStream_t stream_ = nullptr;            // the default stream's
  gpu::StreamQueues<cudaStream_t> streams_;  // the other streams'
  void* cublaslt_ = nullptr;                 // cublasLtHandle_t, made on first GEMM
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  DeviceStreamOrder order_;  // before blocks_, whose release forgets blocks here
  DeviceBlockCache blocks_;
  mutable absl::Mutex mu_;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  std::string broken_by_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<CudaKernel>> kernels_ ABSL_GUARDED_BY(mu_);
  absl::Mutex gemm_mu_;
  // cuBLASLt's algorithm (cublasLtMatmulAlgo_t's bytes) per GEMM shape, asked once.
  using GemmAlgo = std::array<uint64_t, 8>;
  absl::flat_hash_map<std::vector<int64_t>, GemmAlgo> gemm_algos_ ABSL_GUARDED_BY(gemm_mu_);
  // Constant blocks by content, with the references handed out.
  struct Constant {
    void* block = nullptr;
    int64_t refs = 0;
  };
  absl::Mutex constants_mu_;
  absl::flat_hash_map<std::vector<int64_t>, Constant> constants_ ABSL_GUARDED_BY(constants_mu_);
  absl::flat_hash_map<const void*, std::vector<int64_t>> constant_keys_
      ABSL_GUARDED_BY(constants_mu_);
  absl::once_flag collectives_once_;
  std::unique_ptr<DeviceCollectives> collectives_;
  absl::once_flag cudnn_once_;
  std::unique_ptr<CudnnConvolutions> cudnn_;
};

// Every CUDA device, opened once per process. Empty without a driver or a GPU (the CUDA
// runtime reports no device; nothing is loaded then).
const std::vector<std::shared_ptr<CudaDevice>>& Devices();

}  // namespace tensord::cuda
