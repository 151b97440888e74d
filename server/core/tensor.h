// A tensor value: dtype, shape, device and a shared, contiguous byte buffer. Tensors are
// values with shared storage: copying a Tensor shares bytes; ops never mutate their inputs
// (the one in-place op, assign, swaps the storage of a session entry instead).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/core/dtype.h"
#include "server/core/shape.h"

namespace tensord {

struct AutogradMeta;  // defined by server/autodiff; core only carries the pointer.

// Bytes charged to a session. Storage allocated against an account is refused when it would
// exceed the quota and is credited back when freed, so the account always equals live bytes.
class MemoryAccount {
 public:
  explicit MemoryAccount(int64_t quota_bytes) : quota_(quota_bytes) {}
  // Reserves `bytes` or returns QUOTA_EXCEEDED naming the quota and the request.
  absl::Status Charge(int64_t bytes);
  void Credit(int64_t bytes) { used_.fetch_sub(bytes); }
  int64_t used() const { return used_.load(); }
  int64_t quota() const { return quota_; }
  // The most one allocation (one tensor) may take; above it Charge returns LIMIT_EXCEEDED
  // (limit max_tensor_bytes) whatever the quota. Unlimited unless set.
  void set_max_charge_bytes(int64_t bytes) { max_charge_.store(bytes); }
  int64_t max_charge_bytes() const { return max_charge_.load(); }

 private:
  const int64_t quota_;
  std::atomic<int64_t> used_{0};
  std::atomic<int64_t> max_charge_{INT64_MAX};
};

// The device every server has: host memory, the CPU backend. Tensors made without naming a
// device live there.
inline constexpr char kHostDevice[] = "cpu";

// Memory of a device other than the host, as its backend manages it. A block is an opaque
// handle (a cl_mem, a CUDA device pointer); only the backend's kernels and copies read it.
class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // A block of at least `bytes` bytes, or OUT_OF_MEMORY (RESOURCE_EXHAUSTED) naming the device.
  virtual absl::StatusOr<void*> Allocate(size_t bytes) = 0;
  // Returns a block of Allocate(bytes); called when the last tensor using it is gone.
  virtual void Free(void* block, size_t bytes) = 0;
};

// A buffer of tensor bytes: 64-byte aligned host memory, or a block of a device's memory.
// Allocation failure is reported, never thrown; either way the bytes are charged to the
// account for as long as the storage lives.
class Storage {
 public:
  static absl::StatusOr<std::shared_ptr<Storage>> Allocate(
      size_t bytes, std::shared_ptr<MemoryAccount> account = nullptr);
  // A block of `memory` (host memory when null), charged to `account` before the device is
  // asked, so a quota refuses device memory exactly as it refuses host memory.
  static absl::StatusOr<std::shared_ptr<Storage>> AllocateOn(
      std::shared_ptr<DeviceMemory> memory, size_t bytes,
      std::shared_ptr<MemoryAccount> account = nullptr);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  // Host storage: a pointer to the bytes. Device storage: the backend's handle.
  void* data() { return data_; }
  const void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  // Whether data() points at host bytes that may be read and written directly.
  bool on_host() const { return memory_ == nullptr; }
  // Bumped by in-place writes (assign); backward refuses saved tensors whose version moved.
  uint64_t version() const { return version_.load(); }
  void BumpVersion() { version_.fetch_add(1); }
  // Undoes in-place writes whose bytes were restored (rollback of an atomic Execute batch), so
  // values saved for backward before the batch stay usable.
  void RestoreVersion(uint64_t version) { version_.store(version); }

 private:
  Storage(void* data, size_t bytes, std::shared_ptr<MemoryAccount> account,
          std::shared_ptr<DeviceMemory> memory)
      : data_(data), bytes_(bytes), account_(std::move(account)), memory_(std::move(memory)) {}
  bool holds_inline() const { return data_ == inline_; }
  // Host tensors of at most this many bytes (numbers, short vectors: most of what a step's
  // small ops make) keep their bytes in the Storage itself, with no allocation of their own.
  static constexpr size_t kInlineBytes = 64;
  alignas(16) unsigned char inline_[kInlineBytes];
  void* data_;
  size_t bytes_;
  std::shared_ptr<MemoryAccount> account_;
  std::shared_ptr<DeviceMemory> memory_;  // null for host memory
  std::atomic<uint64_t> version_{0};
};

struct TensorMeta {
  DType dtype = DType::kF32;
  Shape shape;
  // A Python scalar operand (Tensor::wrapped_number): shape rules where PyTorch's overload for
  // a number differs from the tensor one (scatter's value fills every indexed place) read it.
  bool wrapped_number = false;
  // Where the value lives: what backward makes its zeros and seeds on.
  std::string device = kHostDevice;
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates an uninitialised tensor in host memory.
  static absl::StatusOr<Tensor> Empty(DType dtype, Shape shape, std::string device = kHostDevice,
                                      std::shared_ptr<MemoryAccount> account = nullptr);
  static absl::StatusOr<Tensor> Zeros(DType dtype, Shape shape, std::string device = kHostDevice,
                                      std::shared_ptr<MemoryAccount> account = nullptr);
  // An uninitialised tensor in a block of `memory` (host memory when null), the storage of
  // device `device`.
  static absl::StatusOr<Tensor> EmptyOn(std::shared_ptr<DeviceMemory> memory, DType dtype,
                                        Shape shape, std::string device,
                                        std::shared_ptr<MemoryAccount> account = nullptr);
  // Builds a tensor from host values (tests and small constants).
  template <typename T>
  static Tensor FromVector(const std::vector<T>& values, Shape shape);
  template <typename T>
  static Tensor Scalar(T value) {
    return FromVector<T>({value}, {});
  }

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t i) const { return shape_[i]; }
  int64_t numel() const { return NumElements(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * DTypeSize(dtype_); }
  const std::string& device() const { return device_; }
  TensorMeta meta() const { return {dtype_, shape_, wrapped_number_, device_}; }

  template <typename T>
  T* data() {
    return static_cast<T*>(storage_->data());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(storage_->data());
  }
  void* raw() { return storage_ ? storage_->data() : nullptr; }
  const void* raw() const { return storage_ ? storage_->data() : nullptr; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Autodiff identity (null for plain tensors). Shared by copies of this Tensor value.
  const std::shared_ptr<AutogradMeta>& autograd() const { return autograd_; }
  void set_autograd(std::shared_ptr<AutogradMeta> meta) { autograd_ = std::move(meta); }
  // A Python/JSON scalar operand: weaker than any tensor in type promotion (PyTorch's
  // "wrapped number"), so `int_tensor * 0.5` is f32 and `f64_tensor * 0.1` stays f64.
  bool wrapped_number() const { return wrapped_number_; }
  void set_wrapped_number(bool w) { wrapped_number_ = w; }
  // Plain copy of the value: same storage, no autodiff identity.
  Tensor Detached() const {
    Tensor t = *this;
    t.autograd_.reset();
    return t;
  }

  // Same bytes, new shape (element counts must match; checked by the caller).
  Tensor Reshaped(Shape shape) const;
  // Host values as double (tests, debugging and attribute-like tensor operands of CPU kernels;
  // host storage only).
  std::vector<double> ToDoubles() const;
  // Reads element `i` (flat index) as double.
  double ElementAsDouble(int64_t i) const;

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  std::string device_ = kHostDevice;
  std::shared_ptr<Storage> storage_;
  std::shared_ptr<AutogradMeta> autograd_;
  bool wrapped_number_ = false;
};

template <typename T>
Tensor Tensor::FromVector(const std::vector<T>& values, Shape shape) {
  Tensor t = Empty(DTypeOf<T>::value, std::move(shape)).value();
  for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
  return t;
}

}  // namespace tensord
