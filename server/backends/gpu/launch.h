// Launching the generated kernels on a device runtime: buffer arguments (device blocks, or
// host number operands copied over), argument lists, launches as families plan them (kernel
// source, arguments, work size) and their one way to the runtime (Enqueue), and the
// elementwise map every elementwise op, cast, fill and strided copy runs through.
#pragma once

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backends/gpu/codegen/elementwise_exprs.h"
#include "server/backends/gpu/codegen/kernel_source.h"
#include "server/backends/gpu/device_runtime.h"
#include "server/core/status.h"

namespace tensord::gpu {

// A number operand: a 0-d tensor in host memory, which a kernel may take by value.
inline bool IsNumberOperand(const Tensor& t) {
  return t.storage() != nullptr && t.storage()->on_host() && t.rank() == 0 && t.nbytes() <= 8;
}

// A buffer argument of a kernel: the tensor's block, a device copy of a host number operand
// (a 0-d tensor), a temporary block or a constant block, the last three given back to the
// runtime with the operand (the runtime's in-order queue runs a later writer of the block
// after the kernels enqueued before).
class Operand {
 public:
  static absl::StatusOr<Operand> Of(const Tensor& t, DeviceRuntime& device) {
    Operand o;
    if (t.storage() != nullptr && !t.storage()->on_host()) {
      o.block_ = t.raw();
      return o;
    }
    if (t.nbytes() == 0) return o;
    if (IsNumberOperand(t)) {
      // Its bits as a constant block, cached by content: a step passing the same number again
      // creates and writes nothing. Kernels read the value from the block's first bytes.
      int64_t bits = 0;
      std::memcpy(&bits, t.raw(), t.nbytes());
      return Constants(device, {bits});
    }
    ASSIGN_OR_RETURN(o, Block(device, t.nbytes()));
    RETURN_IF_ERROR(device.Write(const_cast<void*>(o.block_), 0, t.raw(), t.nbytes()));
    return o;
  }
  // A block of the device's memory of `bytes`, given back to the device with the operand.
  static absl::StatusOr<Operand> Block(DeviceRuntime& device, size_t bytes) {
    ASSIGN_OR_RETURN(void* block, device.Allocate(bytes));
    Operand o;
    o.block_ = block;
    o.device_ = &device;
    o.bytes_ = bytes;
    return o;
  }
  // The runtime's constant block of `values` (geometry, tables), released with the operand.
  static absl::StatusOr<Operand> Constants(DeviceRuntime& device,
                                           const std::vector<int64_t>& values) {
    ASSIGN_OR_RETURN(const void* block, device.Constants(values));
    Operand o;
    o.block_ = block;
    o.device_ = &device;
    o.constants_ = true;
    return o;
  }
  Operand() = default;
  Operand(Operand&& other) noexcept { *this = std::move(other); }
  Operand& operator=(Operand&& other) noexcept {
    if (this != &other) {
      Release();
      block_ = other.block_;
      device_ = other.device_;
      bytes_ = other.bytes_;
      constants_ = other.constants_;
      other.device_ = nullptr;
    }
    return *this;
  }
  ~Operand() { Release(); }
  const void* block() const { return block_; }
  void* mutable_block() const { return const_cast<void*>(block_); }

 private:
  void Release() {
    if (device_ != nullptr) {
      if (constants_) {
        device_->ReleaseConstants(block_);
      } else {
        device_->Free(const_cast<void*>(block_), bytes_);
      }
    }
    device_ = nullptr;
  }
  const void* block_ = nullptr;
  DeviceRuntime* device_ = nullptr;  // owner of a temporary or constant block
  size_t bytes_ = 0;
  bool constants_ = false;
};

// A launch's arguments, with operands added as their blocks.
class Args : public KernelArgs {
 public:
  Args& AddMem(const Operand& o) {
    Block(o.block());
    return *this;
  }
  template <typename V>
  Args& Add(V v) {
    KernelArgs::Add(v);
    return *this;
  }
  Args& AddScalar(DType compute, double v) {
    KernelArgs::AddScalar(compute, v);
    return *this;
  }
  // A value of the templates' WIDE type on `device` (double, or float without fp64).
  Args& AddWide(const DeviceRuntime& device, double v) {
    if (device.has_fp64()) return Add(v);
    return Add(static_cast<float>(v));
  }
};

// `t` in host memory: itself when it is there, else a blocking read of its block (indices and
// targets a backend checks before any kernel runs).
absl::StatusOr<Tensor> ReadToHost(const Tensor& t, DeviceRuntime& device);

// Whether any element of `t` is zero: a flag kernel on the device (one 4-byte read back), or
// the values themselves for a host number operand.
absl::StatusOr<bool> AnyZero(DeviceRuntime& device, const Tensor& t);

// A generated kernel as a family plans it: what determines its source (`key`: the name when
// that says it all), its name in the source, and its source rendered in a device's dialect.
struct KernelSource {
  std::string key;
  std::string name;
  std::function<std::string(const Dialect&)> render;
};

// One launch as a family plans it: the kernel, its arguments in parameter order (operand
// blocks and scalars), and its work size: `items` work items, in work groups of `group` that
// share local memory and barriers when group > 0. A family turns a call into launches (the
// host-side planning: geometry, tables, index checks, pass sequences) and hands each to
// Enqueue; nothing else reaches the runtime's compile and launch.
struct Launch {
  Launch(KernelSource kernel, int64_t items, int group = 0)
      : kernel(std::move(kernel)), items(items), group(group) {}
  KernelSource kernel;
  int64_t items = 0;
  int group = 0;
  Args args;
};

// Builds `launch`'s kernel on first use on `device` (cached by its key) and enqueues it on the
// calling thread's stream.
absl::Status Enqueue(DeviceRuntime& device, const Launch& launch);
// The same for a launch in work groups, when its kernel runs on groups that large (its
// CompiledKernel::max_group_size, and CapKernelGroups); false, nothing enqueued, when it does
// not: the family then launches a form with smaller groups or none.
absl::StatusOr<bool> EnqueueIfGroupsFit(DeviceRuntime& device, const Launch& launch);
// Caps every kernel's largest work group at `size` in this process (0: no cap), as a device
// whose kernels take fewer items than it does would: tests run the families' fallbacks so.
void CapKernelGroups(int size);

// A kernel name unique to an op and the dtypes its source was rendered for.
std::string KernelName(const std::string& op, const std::vector<DType>& dtypes);

// out[i] = expr over `inputs` walked by `geometry` (their strides), computed as `compute`.
absl::Status LaunchMap(DeviceRuntime& device, const std::string& op,
                       const gpu::ElementwiseExpr& expr, DType compute,
                       const std::vector<Tensor>& inputs, const gpu::Geometry& geometry,
                       Tensor& out);
// out = in read with `strides` over out's shape (permute, expand, copies), cast to out's dtype.
absl::Status Copy(DeviceRuntime& device, const std::string& op, const Tensor& in,
                  std::vector<int64_t> strides, Tensor& out);
// Every element of out = value.
absl::Status Fill(DeviceRuntime& device, double value, Tensor& out);
// out += addend (broadcast to out's shape), in place.
absl::Status AddInPlace(DeviceRuntime& device, const Tensor& addend, Tensor& out);

}  // namespace tensord::gpu
