// What the device-neutral GPU layer asks of a vendor: compile and cache a kernel from generated
// source, allocate and free blocks, copy host<->device and device<->device, launch a kernel
// over n work items with buffer and scalar arguments, synchronize, the vendor's GEMM and, where
// it has one, the vendor's convolution library.
// A runtime is one device; its blocks are opaque handles (an OpenCL cl_mem, a CUDA device
// pointer), and nothing above it includes a vendor header.
//
// Ordering: a runtime runs what one stream (server/core/stream_scope.h: the calling thread's)
// gives it in the order given, on an in-order queue of that stream's, so a read sees every
// launch the stream enqueued before it. Blocks that cross streams are ordered by the runtime
// (server/core/device_stream_order.h), so a block freed after a launch may be handed out again
// at once, to any stream.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/backends/gpu/codegen/conv_source.h"
#include "server/backends/gpu/codegen/kernel_source.h"
#include "server/core/device_collectives.h"
#include "server/core/dtype.h"
#include "server/core/matmul_precision.h"
#include "server/core/status.h"
#include "server/core/tensor.h"
#include "server/ops/nn_geometry.h"

namespace tensord::gpu {

// TENSORD_GPU_FP64=off, read once.
inline bool Fp64TurnedOff() {
  static const bool off = [] {
    const char* v = std::getenv("TENSORD_GPU_FP64");
    return v != nullptr && std::string(v) == "off";
  }();
  return off;
}

// TENSORD_GPU_MEMORY_LIMIT, in bytes, read once: the most device memory a runtime holds from its
// driver (DeviceBlockCache::set_limit); 0 (unset or not a number): the device's own.
inline size_t MemoryLimit() {
  static const size_t limit = [] {
    const char* v = std::getenv("TENSORD_GPU_MEMORY_LIMIT");
    if (v == nullptr) return size_t{0};
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(v, &end, 10);
    return end != v && *end == '\0' ? static_cast<size_t>(bytes) : size_t{0};
  }();
  return limit;
}

// A kernel a runtime compiled; opaque above it but for the largest work group it runs on, as
// the runtime reports it once compiled (its registers and local memory may cap it below the
// device's max_group_size()); 0: the device's.
class CompiledKernel {
 public:
  virtual ~CompiledKernel() = default;
  int max_group_size = 0;
};

// A launch's arguments in the kernel's parameter order: device blocks and scalar values.
class KernelArgs {
 public:
  struct Arg {
    bool is_block = false;
    const void* block = nullptr;  // is_block: the runtime's handle (may be null: 0 bytes)
    uint64_t bits = 0;            // otherwise: the value's bytes, `size` of them
    uint8_t size = 0;
  };
  KernelArgs& Block(const void* block) {
    Arg a;
    a.is_block = true;
    a.block = block;
    args_.push_back(a);
    return *this;
  }
  // A value of exactly the kernel parameter's type (int32_t for int, int64_t for long, ...).
  template <typename V>
  KernelArgs& Add(V v) {
    static_assert(std::is_arithmetic_v<V> && sizeof(V) <= sizeof(uint64_t));
    Arg a;
    std::memcpy(&a.bits, &v, sizeof(V));
    a.size = sizeof(V);
    args_.push_back(a);
    return *this;
  }
  // `size` bytes (1, 2, 4 or 8) as one value of that size: a number operand in its storage type.
  KernelArgs& Bytes(const void* value, size_t size) {
    Arg a;
    std::memcpy(&a.bits, value, size);
    a.size = static_cast<uint8_t>(size);
    args_.push_back(a);
    return *this;
  }
  // A scalar of a kernel's compute type T (what `ComputeType` renders for `compute`).
  KernelArgs& AddScalar(DType compute, double v) {
    switch (ComputeDType(compute)) {
      case DType::kF64:
        return Add(v);
      case DType::kI64:
        return Add(static_cast<int64_t>(v));
      case DType::kI32:
      case DType::kBool:
        return Add(static_cast<int32_t>(v));
      default:
        return Add(static_cast<float>(v));
    }
  }
  absl::Span<const Arg> args() const { return args_; }

 private:
  std::vector<Arg> args_;
};

// C = op(A) op(B) for `batch` row-major matrices, A[b] at a + a_offset + b * a_stride elements
// (a_stride 0: one matrix for every batch entry), C[b] contiguous from c + c_offset. The
// offsets address a view inside a larger block (a block is a handle, not a pointer, on some
// runtimes).
struct GemmShape {
  DType dtype = DType::kF32;  // one the runtime's GemmTakes
  size_t rows = 0, cols = 0, inner = 0, batch = 1;
  bool transpose_a = false, transpose_b = false;
  size_t a_stride = 0, b_stride = 0;
  size_t a_offset = 0, b_offset = 0, c_offset = 0;
  // C += op(A) op(B) instead of C = op(A) op(B) (never with a bias).
  bool accumulate = false;
  // What an f32 product may compute in (the calling session's, matmul_precision.h).
  MatmulPrecision precision = MatmulPrecision::kHighest;
};

// One pass of a correlation (conv_source.h) for a vendor's convolution library: its operands
// a and b in the pass's order, every tensor dense in NC(D)HW order, the weights [yc, cin_g, k...].
struct ConvolutionShape {
  ConvPass pass = ConvPass::kY;
  nn::Correlation g;
  DType dtype = DType::kF32;
  // What an f32 convolution may compute in (the calling session's, matmul_precision.h).
  MatmulPrecision precision = MatmulPrecision::kHighest;
};

class DeviceRuntime : public DeviceMemory, public std::enable_shared_from_this<DeviceRuntime> {
 public:
  virtual const std::string& name() const = 0;  // "opencl:0"
  // The backend kind its name starts with ("opencl").
  std::string kind() const { return name().substr(0, name().find(':')); }
  // Whether kernels may use double: the device's own answer, unless TENSORD_GPU_FP64=off
  // (which simulates a device without fp64 for tests).
  bool has_fp64() const { return native_fp64() && !Fp64TurnedOff(); }
  virtual bool native_fp64() const = 0;
  // The C dialect its kernels are rendered in (its `wide` type float where has_fp64() is false).
  virtual const Dialect& dialect() const = 0;

  // The kernel `name` cached under `key` (what determines its source), built from
  // `render(dialect())` on first use only. A build failure is INTERNAL with the compiler's log (a
  // generator bug, never user input: sources come from the op table).
  virtual absl::StatusOr<CompiledKernel*> Kernel(
      const std::string& key, const std::string& name,
      const std::function<std::string(const Dialect&)>& render) = 0;
  // Enqueues `kernel` over `n` work items with `args`.
  virtual absl::Status Launch(CompiledKernel* kernel, const KernelArgs& args, int64_t n) = 0;
  // Enqueues `kernel` over `groups` work groups of `size` work items each (they share local
  // memory and barriers); `size` at most max_group_size().
  virtual absl::Status LaunchGroups(CompiledKernel* kernel, const KernelArgs& args, int64_t groups,
                                    int size) = 0;
  virtual int max_group_size() const = 0;
  // Whether the device's work items are the host's CPU cores (an OpenCL CPU device such as
  // PoCL): there one work item walking a long group is fastest, as a core's loop; a GPU wants
  // the group spread over a work group.
  virtual bool runs_on_host_cores() const = 0;
  // Whether long reductions fold in work-group trees: on a GPU, unless
  // TENSORD_GPU_TREE_REDUCTIONS says "on" or "off" (tests run trees on any device so).
  bool tree_reductions() const {
    static const char* forced = std::getenv("TENSORD_GPU_TREE_REDUCTIONS");
    if (forced != nullptr && std::string(forced) == "on") return true;
    if (forced != nullptr && std::string(forced) == "off") return false;
    return !runs_on_host_cores();
  }

  // Host bytes into a block (at a byte offset), and back; both return when the host side may
  // be reused, a read after every launch enqueued before it.
  virtual absl::Status Write(void* block, size_t offset, const void* src, size_t bytes) = 0;
  virtual absl::Status Read(const void* block, size_t offset, void* dst, size_t bytes) = 0;
  // `bytes` from one block of this device into another.
  virtual absl::Status CopyOnDevice(const void* src, void* dst, size_t bytes) = 0;

  // A read-only block holding `values` (kernel geometry, tables), held until
  // ReleaseConstants. Small ones are cached by content, so a step that launches the same
  // shapes again creates and writes nothing.
  virtual absl::StatusOr<const void*> Constants(const std::vector<int64_t>& values) = 0;
  virtual void ReleaseConstants(const void* block) = 0;

  // The vendor's GEMM on blocks of this device, for the dtypes GemmTakes. With `bias` (where
  // GemmAddsBias: `cols` values of the dtype), C[b][i][j] = sum + bias[j], rounded once.
  virtual bool GemmTakes(DType dtype) const { return dtype == DType::kF32 || dtype == DType::kF64; }
  virtual bool GemmAddsBias() const { return false; }
  virtual absl::Status Gemm(const GemmShape& shape, const void* a, const void* b, void* c,
                            const void* bias) = 0;

  // The vendor's convolution library (cuDNN on CUDA): the bytes of workspace the fastest of its
  // deterministic algorithms for `shape` that needs at most `max_workspace` bytes asks for, or
  // nullopt where the runtime has no library, cannot load it, or no such algorithm takes the
  // shape (dtype, sizes); then the GPU layer's own passes run the call.
  virtual absl::StatusOr<std::optional<size_t>> ConvolutionWorkspace(const ConvolutionShape&,
                                                                     size_t max_workspace) {
    return std::nullopt;
  }
  // Enqueues the pass with the algorithm ConvolutionWorkspace(shape, workspace_bytes) chose:
  // out = the pass's product of a and b, `workspace` a block of `workspace_bytes` (null when 0).
  virtual absl::Status Convolution(const ConvolutionShape&, const void* a, const void* b, void* out,
                                   void* workspace, size_t workspace_bytes) {
    return Error(Reason::kInternal, name() + " has no convolution library");
  }

  // Waits until everything enqueued is done.
  virtual absl::Status Synchronize() = 0;

  // The vendor's collectives library for this device (NCCL on CUDA), or null where it has none
  // or it cannot be loaded.
  virtual DeviceCollectives* collectives() { return nullptr; }
};

}  // namespace tensord::gpu
