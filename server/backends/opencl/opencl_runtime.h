// The OpenCL platform as the backend uses it: the devices found (one context and one in-order
// queue each, made once per process), their memory, and the kernels built from generated
// source, cached per source text.
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
#include "server/core/device_block_cache.h"
#include "server/core/tensor.h"

namespace tensord::opencl {

// An OpenCL error as a status: OUT_OF_MEMORY for allocation failures, INTERNAL otherwise,
// naming what failed and the CL error.
absl::Status ClError(cl_int err, const std::string& what, const std::string& device);

// A kernel built once; its arguments are set and it is enqueued under `mu`, because an OpenCL
// kernel object holds its arguments.
struct BuiltKernel {
  cl_program program = nullptr;
  cl_kernel kernel = nullptr;
  absl::Mutex mu;
};

class ClDevice : public DeviceMemory, public std::enable_shared_from_this<ClDevice> {
 public:
  ClDevice(std::string name, cl_platform_id platform, cl_device_id id);
  ~ClDevice() override;
  // Opens the context and queue; the device is unusable when this fails.
  absl::Status Open();

  const std::string& name() const { return name_; }
  const std::string& description() const { return description_; }
  const std::string& vendor() const { return vendor_; }
  int64_t memory_bytes() const { return memory_bytes_; }
  bool has_fp64() const { return has_fp64_; }
  cl_command_queue queue() const { return queue_; }

  // DeviceMemory: buffers of the device's context, cached for reuse (a freed buffer may be
  // handed out while kernels queued before still read it: the one in-order queue runs its new
  // writer after them). A 0-byte block is no buffer at all.
  absl::StatusOr<void*> Allocate(size_t bytes) override;
  void Free(void* block, size_t bytes) override;

  // The kernel `name` cached under `key` (what determines its source), built from `render()`
  // on first use only, so a cached call renders no source. A build failure is INTERNAL with
  // the compiler's log (a generator bug, never user input: sources come from the op table).
  absl::StatusOr<BuiltKernel*> Kernel(const std::string& key, const std::string& name,
                                      const std::function<std::string()>& render);
  // A read-only buffer holding `values` (kernel geometry, tables), the caller's reference to
  // release (OpenCL keeps it until the kernels using it have run). Small ones are cached by
  // content, so a step that launches the same shapes again creates no buffer and writes
  // nothing: the cache holds a reference of its own, and they are never written.
  absl::StatusOr<cl_mem> Constants(const std::vector<int64_t>& values);
  struct ConstantStats {
    int64_t hits = 0;     // served from the cache
    int64_t created = 0;  // buffers created
  };
  ConstantStats constant_stats() const;
  // Enqueues `kernel` over `n` work items (its arguments set by the caller under its mutex).
  absl::Status Launch(cl_kernel kernel, int64_t n);

  // Number of kernels built so far (the bench reports first-call and cached-call times).
  int64_t kernels_built() const;

 private:
  // A buffer of exactly `bytes` from the driver (the block cache's source).
  absl::StatusOr<void*> NewBuffer(size_t bytes);

  const std::string name_;
  cl_platform_id platform_;
  cl_device_id id_;
  std::string description_, vendor_;
  int64_t memory_bytes_ = 0;
  bool has_fp64_ = false;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
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
