#include "server/core/tensor.h"

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "server/core/host_memory.h"
#include "server/core/status.h"

namespace tensord {

absl::Status MemoryAccount::Charge(int64_t bytes) {
  if (const int64_t max = max_charge_.load(); bytes > max) {
    return Error(Reason::kLimitExceeded,
                 absl::StrCat("session: allocating a tensor of ", bytes,
                              " bytes is above the limit max_tensor_bytes of ", max),
                 {{"limit", "max_tensor_bytes"},
                  {"value", absl::StrCat(bytes)},
                  {"max", absl::StrCat(max)},
                  {"requested_bytes", absl::StrCat(bytes)}});
  }
  int64_t before = used_.fetch_add(bytes);
  if (before + bytes > quota_) {
    used_.fetch_sub(bytes);
    return Error(
        Reason::kQuotaExceeded,
        absl::StrCat("session: allocating ", bytes, " bytes would exceed the memory quota (",
                     before, " of ", quota_, " bytes in use)"),
        {{"requested_bytes", absl::StrCat(bytes)},
         {"used_bytes", absl::StrCat(before)},
         {"quota_bytes", absl::StrCat(quota_)}});
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Storage>> Storage::Allocate(size_t bytes,
                                                           std::shared_ptr<MemoryAccount> account) {
  if (account) RETURN_IF_ERROR(account->Charge(static_cast<int64_t>(bytes)));
  if (bytes <= kInlineBytes) {
    auto storage =
        std::shared_ptr<Storage>(new Storage(nullptr, bytes, std::move(account), nullptr));
    storage->data_ = storage->inline_;
    return storage;
  }
  void* p = host_memory::Allocate(bytes);
  if (p == nullptr) {
    if (account) account->Credit(static_cast<int64_t>(bytes));
    return Error(Reason::kOutOfMemory, absl::StrCat("storage: cannot allocate ", bytes, " bytes"),
                 {{"bytes", absl::StrCat(bytes)}});
  }
  return std::shared_ptr<Storage>(new Storage(p, bytes, std::move(account), nullptr));
}

absl::StatusOr<std::shared_ptr<Storage>> Storage::AllocateOn(
    std::shared_ptr<DeviceMemory> memory, size_t bytes, std::shared_ptr<MemoryAccount> account) {
  if (memory == nullptr) return Allocate(bytes, std::move(account));
  if (account) RETURN_IF_ERROR(account->Charge(static_cast<int64_t>(bytes)));
  absl::StatusOr<void*> block = memory->Allocate(bytes);
  if (!block.ok()) {
    if (account) account->Credit(static_cast<int64_t>(bytes));
    return block.status();
  }
  return std::shared_ptr<Storage>(
      new Storage(*block, bytes, std::move(account), std::move(memory)));
}

Storage::~Storage() {
  if (memory_) {
    memory_->Free(data_, bytes_);
  } else if (!holds_inline()) {
    host_memory::Free(data_, bytes_);
  }
  if (account_) account_->Credit(static_cast<int64_t>(bytes_));
}

namespace {

absl::StatusOr<size_t> CheckedByteCount(DType dtype, const Shape& shape) {
  ASSIGN_OR_RETURN(int64_t n, CheckedNumElements(shape));
  // Up to 2^62 elements pass CheckedNumElements; times an 8-byte dtype that wraps around.
  int64_t bytes;
  if (__builtin_mul_overflow(n, static_cast<int64_t>(DTypeSize(dtype)), &bytes)) {
    return Error(Reason::kLimitExceeded,
                 absl::StrCat("storage: ", n, " elements of ", DTypeName(dtype),
                              " overflow a 64-bit byte count"),
                 {{"limit", "element_count"}, {"shape", ShapeToString(shape)}});
  }
  return static_cast<size_t>(bytes);
}

}  // namespace

absl::StatusOr<Tensor> Tensor::Empty(DType dtype, Shape shape, std::string device,
                                     std::shared_ptr<MemoryAccount> account) {
  return EmptyOn(nullptr, dtype, std::move(shape), std::move(device), std::move(account));
}

absl::StatusOr<Tensor> Tensor::EmptyOn(std::shared_ptr<DeviceMemory> memory, DType dtype,
                                       Shape shape, std::string device,
                                       std::shared_ptr<MemoryAccount> account) {
  ASSIGN_OR_RETURN(size_t bytes, CheckedByteCount(dtype, shape));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.device_ = std::move(device);
  ASSIGN_OR_RETURN(t.storage_, Storage::AllocateOn(std::move(memory), bytes, std::move(account)));
  return t;
}

absl::StatusOr<Tensor> Tensor::Zeros(DType dtype, Shape shape, std::string device,
                                     std::shared_ptr<MemoryAccount> account) {
  ASSIGN_OR_RETURN(Tensor t, Empty(dtype, std::move(shape), std::move(device), std::move(account)));
  std::memset(t.raw(), 0, t.nbytes());
  return t;
}

Tensor Tensor::Reshaped(Shape shape) const {
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

double Tensor::ElementAsDouble(int64_t i) const {
  if (dtype_ == DType::kBF16) return BF16ToFloat(data<uint16_t>()[i]);
  if (dtype_ == DType::kF16) return HalfToFloat(data<uint16_t>()[i]);
  double v = 0;
  TENSORD_DISPATCH_TYPED(dtype_, [&] { v = static_cast<double>(data<T>()[i]); });
  return v;
}

std::vector<double> Tensor::ToDoubles() const {
  std::vector<double> out(numel());
  for (int64_t i = 0, n = numel(); i < n; ++i) out[i] = ElementAsDouble(i);
  return out;
}

}  // namespace tensord
