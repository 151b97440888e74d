// Launching the generated kernels on an OpenCL device: buffer arguments (device blocks, or
// host number operands copied over), argument setting, and the elementwise map every
// elementwise op, cast, fill and strided copy runs through.
#pragma once

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "server/backends/gpu/elementwise_exprs.h"
#include "server/backends/gpu/kernel_source.h"
#include "server/backends/opencl/opencl_runtime.h"
#include "server/core/status.h"

namespace tensord::opencl {

// A buffer argument of a kernel: the tensor's block, or a device copy of a host number
// operand (a 0-d tensor), released with the operand (OpenCL keeps it until the kernel ran).
class Operand {
 public:
  static absl::StatusOr<Operand> Of(const Tensor& t, ClDevice& device) {
    Operand o;
    if (t.storage() != nullptr && !t.storage()->on_host()) {
      o.mem_ = static_cast<cl_mem>(const_cast<void*>(t.raw()));
      return o;
    }
    if (t.nbytes() == 0) return o;
    ASSIGN_OR_RETURN(o, Block(device, t.nbytes()));
    cl_int err = clEnqueueWriteBuffer(device.queue(), o.mem_, CL_TRUE, 0, t.nbytes(), t.raw(), 0,
                                      nullptr, nullptr);
    if (err != CL_SUCCESS) return ClError(err, "writing a number operand", device.name());
    return o;
  }
  // A block of the device's memory of `bytes`, given back to the device with the operand.
  static absl::StatusOr<Operand> Block(ClDevice& device, size_t bytes) {
    ASSIGN_OR_RETURN(void* block, device.Allocate(bytes));
    Operand o;
    o.mem_ = static_cast<cl_mem>(block);
    o.device_ = &device;
    o.bytes_ = bytes;
    return o;
  }
  // Takes over a buffer of its own (a geometry of ClDevice::Constants), released with it.
  static Operand Owning(cl_mem mem) {
    Operand o;
    o.mem_ = mem;
    o.owned_ = true;
    return o;
  }
  Operand() = default;
  Operand(Operand&& other) noexcept
      : mem_(other.mem_), owned_(other.owned_), device_(other.device_), bytes_(other.bytes_) {
    other.owned_ = false;
    other.device_ = nullptr;
  }
  Operand& operator=(Operand&& other) noexcept {
    if (this != &other) {
      Release();
      mem_ = other.mem_;
      owned_ = other.owned_;
      device_ = other.device_;
      bytes_ = other.bytes_;
      other.owned_ = false;
      other.device_ = nullptr;
    }
    return *this;
  }
  ~Operand() { Release(); }
  const cl_mem* arg() const { return &mem_; }

 private:
  void Release() {
    if (owned_) clReleaseMemObject(mem_);
    if (device_ != nullptr) device_->Free(mem_, bytes_);
    owned_ = false;
    device_ = nullptr;
  }
  cl_mem mem_ = nullptr;
  bool owned_ = false;
  ClDevice* device_ = nullptr;  // a block of this device's, freed to it
  size_t bytes_ = 0;
};

// Sets a kernel's arguments in order; the first failure is kept.
class Args {
 public:
  explicit Args(cl_kernel k) : k_(k) {}
  template <typename V>
  Args& Add(const V& v) {
    if (err_ == CL_SUCCESS) err_ = clSetKernelArg(k_, index_++, sizeof(V), &v);
    return *this;
  }
  Args& AddMem(const Operand& o) {
    if (err_ == CL_SUCCESS) err_ = clSetKernelArg(k_, index_++, sizeof(cl_mem), o.arg());
    return *this;
  }
  // A scalar of the kernel's compute type T.
  Args& AddScalar(DType compute, double v) {
    switch (ComputeDType(compute)) {
      case DType::kF64:
        return Add(static_cast<cl_double>(v));
      case DType::kI64:
        return Add(static_cast<cl_long>(v));
      case DType::kI32:
      case DType::kBool:
        return Add(static_cast<cl_int>(v));
      default:
        return Add(static_cast<cl_float>(v));
    }
  }
  cl_int error() const { return err_; }

 private:
  cl_kernel k_;
  cl_uint index_ = 0;
  cl_int err_ = CL_SUCCESS;
};

// `t` in host memory: itself when it is there, else a blocking read of its block (indices and
// targets a backend checks before any kernel runs).
absl::StatusOr<Tensor> ReadToHost(const Tensor& t, ClDevice& device);

// Whether any element of `t` is zero: a flag kernel on the device (one 4-byte read back), or
// the values themselves for a host number operand.
absl::StatusOr<bool> AnyZero(ClDevice& device, const Tensor& t);

// Sets `built`'s arguments through `set` under the kernel's mutex (arguments belong to the
// kernel object, shared by every caller) and enqueues it over `n` work items.
absl::Status SetAndLaunch(ClDevice& device, BuiltKernel* built, const std::string& name, int64_t n,
                          absl::FunctionRef<void(Args&)> set);

// A kernel name unique to an op and the dtypes its source was rendered for.
std::string KernelName(const std::string& op, const std::vector<DType>& dtypes);

// out[i] = expr over `inputs` walked by `geometry` (their strides), computed as `compute`.
absl::Status LaunchMap(ClDevice& device, const std::string& op, const gpu::ElementwiseExpr& expr,
                       DType compute, const std::vector<Tensor>& inputs,
                       const gpu::Geometry& geometry, Tensor& out);
// out = in read with `strides` over out's shape (permute, expand, copies), cast to out's dtype.
absl::Status Copy(ClDevice& device, const std::string& op, const Tensor& in,
                  std::vector<int64_t> strides, Tensor& out);
// Every element of out = value.
absl::Status Fill(ClDevice& device, double value, Tensor& out);
// out += addend (broadcast to out's shape), in place.
absl::Status AddInPlace(ClDevice& device, const Tensor& addend, Tensor& out);

}  // namespace tensord::opencl
