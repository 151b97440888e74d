// The OpenCL runtime: the devices found (one context each, made once per process), their
// queues (an in-order queue per stream, stream_scope.h: one per session that uses the device),
// their memory, the kernels built from generated source (cached per source text), CLBlast's
// GEMM, and the OpenCL C dialect the kernels are rendered in. The only code of the backend that
// touches the OpenCL API.
#pragma once

#include <CL/cl.h>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/backends/gpu/device_runtime.h"
#include "server/backends/gpu/stream_queues.h"
#include "server/core/device_block_cache.h"
#include "server/core/device_stream_order.h"
#include "server/core/tensor.h"

namespace tensord::opencl {

// An OpenCL error as a status: OUT_OF_MEMORY for allocation failures, INTERNAL otherwise,
// naming what failed and the CL error.
absl::Status ClError(cl_int err, const std::string& what, const std::string& device);

// OpenCL C, and the same with float as its wide type (devices without fp64).
const gpu::Dialect& Dialect();
const gpu::Dialect& DialectWithoutFp64();

// A kernel built once; its arguments are set and it is enqueued under `mu`, because an OpenCL
// kernel object holds its arguments.
struct BuiltKernel : gpu::CompiledKernel {
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
  std::string name;
  absl::Mutex mu;
};

class ClDevice : public gpu::DeviceRuntime {
 public:
  ClDevice(std::string name, cl_platform_id platform, cl_device_id id);
  ~ClDevice() override;
  // Opens the context and queue; the device is unusable when this fails.
  absl::Status Open();

  const std::string& name() const override { return name_; }
  bool native_fp64() const override { return has_fp64_; }
  const gpu::Dialect& dialect() const override {
    return has_fp64() ? Dialect() : DialectWithoutFp64();
  }
  const std::string& description() const { return description_; }
  const std::string& vendor() const { return vendor_; }
  int64_t memory_bytes() const { return memory_bytes_; }
  // The calling thread's queue (StreamScope): the default queue on stream 0, else the stream's
  // own, made on first use and released when the stream ends.
  absl::StatusOr<cl_command_queue> CurrentQueue();
  // Streams that have a queue of their own now (the default queue not counted).
  size_t stream_queues() const;

  // DeviceMemory: buffers of the device's context, cached for reuse (a freed buffer may be
  // handed out while kernels queued before still read it: its new writer is queued after them,
  // on the same queue or after a wait for the queue that named it last). A 0-byte block is no
  // buffer at all.
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* block, size_t bytes) override;

  absl::StatusOr<gpu::CompiledKernel*> Kernel(
      const std::string& key, const std::string& name,
      const std::function<std::string(const gpu::Dialect&)>& render) override;
  absl::Status Launch(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args, int64_t n) override;
  absl::Status LaunchGroups(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args,
                            int64_t groups, int size) override;
  int max_group_size() const override { return max_group_size_; }
  bool runs_on_host_cores() const override { return cpu_; }
  absl::Status Write(void* block, size_t offset, const void* src, size_t bytes) override;
  absl::Status Read(const void* block, size_t offset, void* dst, size_t bytes) override;
  absl::Status CopyOnDevice(const void* src, void* dst, size_t bytes) override;
  // Constant blocks are buffers with a reference of the caller's (and one of the cache's).
  absl::StatusOr<const void*> Constants(const std::vector<int64_t>& values) override;
  void ReleaseConstants(const void* block) override;
  absl::Status Gemm(const gpu::GemmShape& shape, const void* a, const void* b, void* c,
                    const void* bias) override;
  absl::Status Synchronize() override;

  struct ConstantStats {
    int64_t hits = 0;     // served from the cache
    int64_t created = 0;  // buffers created
  };
  ConstantStats constant_stats() const;

  // Number of kernels built so far (the bench reports first-call and cached-call times).
  int64_t kernels_built() const;

  // Whether host transfers go through pinned staging: on a device whose memory is not the
  // host's (a GPU), unless TENSORD_GPU_STAGING says "on" or "off" (tests stage on any device).
  bool staged() const { return staged_; }

 private:
  // Orders the calling thread's stream after the streams that named `blocks` last
  // (device_stream_order.h) and returns its queue.
  absl::StatusOr<cl_command_queue> QueueFor(absl::Span<const void* const> blocks);
  // The queue of `stream`, made on its first use.
  absl::StatusOr<cl_command_queue> StreamQueue(uint64_t stream);
  // Makes `to`'s queue wait for what `from`'s enqueued so far (a marker and a barrier).
  absl::Status Wait(uint64_t from, uint64_t to);
  // Finishes and releases the queue of a stream that ended.
  void EndStream(uint64_t stream);
  // Sets the arguments and enqueues n work items (in groups of `local`, 0: the driver's).
  absl::Status Enqueue(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args, int64_t n,
                       int local);
  // A buffer of exactly `bytes` from the driver (the block cache's source).
  absl::StatusOr<void*> NewBuffer(size_t bytes);
  // Write and Read through the pinned staging buffer, a chunk at a time.
  absl::Status StagedWrite(cl_mem block, size_t offset, const char* src, size_t bytes);
  absl::Status StagedRead(cl_mem block, size_t offset, char* dst, size_t bytes);
  // Creates the staging buffer on first use.
  absl::Status EnsureStaging() ABSL_EXCLUSIVE_LOCKS_REQUIRED(staging_mu_);

  const std::string name_;
  cl_platform_id platform_;
  cl_device_id id_;
  std::string description_, vendor_;
  int64_t memory_bytes_ = 0;
  bool has_fp64_ = false;
  int max_group_size_ = 1;
  bool cpu_ = false;  // CL_DEVICE_TYPE_CPU
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;            // stream 0's
  gpu::StreamQueues<cl_command_queue> queues_;  // the other streams'
  // Host-allocated (pinned, mapped) memory that transfers of at least kStagedFrom bytes pass
  // through: the driver copies from it by DMA, without staging pageable memory itself.
  bool staged_ = false;
  absl::Mutex staging_mu_;
  cl_mem staging_ ABSL_GUARDED_BY(staging_mu_) = nullptr;
  DeviceStreamOrder order_;  // before blocks_, whose release forgets blocks here
  DeviceBlockCache blocks_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<BuiltKernel>> kernels_ ABSL_GUARDED_BY(mu_);
  // Cached constant buffers by content, least recently used first in constants_order_.
  mutable absl::Mutex constants_mu_;
  struct CachedConstants {
    cl_mem mem;
    std::list<std::vector<int64_t>>::iterator order;
  };
  absl::flat_hash_map<std::vector<int64_t>, CachedConstants> constants_
      ABSL_GUARDED_BY(constants_mu_);
  std::list<std::vector<int64_t>> constants_order_ ABSL_GUARDED_BY(constants_mu_);
  ConstantStats constant_stats_ ABSL_GUARDED_BY(constants_mu_);
};

// Every OpenCL GPU/CPU/accelerator device of every platform, named opencl:0, opencl:1, ... in
// platform order, opened once per process. Empty when there is no platform (no ICD) or none
// opens.
const std::vector<std::shared_ptr<ClDevice>>& Devices();

}  // namespace tensord::opencl
