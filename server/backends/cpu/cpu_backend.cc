#include "server/backends/cpu/cpu_backend.h"

#include <cstring>
#include <new>
#include <thread>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/onednn_call_memo.h"
#include "server/backends/cpu/onednn_common.h"
#include "server/backends/cpu/parallel_regions.h"
#include "server/core/status.h"

namespace tensord {
namespace {

class CpuBackend : public Backend {
 public:
  std::string kind() const override { return "cpu"; }

  // The description is made once: hardware_concurrency() reads /sys/devices/system/cpu/online
  // each time it is called.
  explicit CpuBackend(int threads)
      : threads_(threads),
        devices_{{kHostDevice, "cpu",
                  absl::StrCat("host CPU, ", std::thread::hardware_concurrency(), " threads",
                               threads > 0 ? absl::StrCat(" (", threads, " per kernel call)") : "",
                               ", oneDNN"),
                  "", 0}} {}

  std::vector<DeviceInfo> Devices() const override { return devices_; }

  absl::StatusOr<KernelPlan> Plan(const KernelQuery& q) const override {
    const cpu::Kernel* kernel = cpu::KernelTable::Get().Plan(q);
    if (kernel == nullptr) {
      return Error(Reason::kUnsupportedOnBackend,
                   absl::StrCat("cpu: no kernel for ", q.op.name, " with these dtypes (",
                                q.dtypes.empty() ? "-" : DTypeName(q.dtypes[0]), ")"),
                   {{"op", q.op.name}, {"backend", "cpu"}, {"device", std::string(kHostDevice)}});
    }
    return KernelPlan{kernel};
  }

  bool Implements(const OpDef& op) const override { return cpu::KernelTable::Get().Has(op); }

  absl::StatusOr<Tensor> Allocate(DType dtype, Shape shape, const std::string& device,
                                  std::shared_ptr<MemoryAccount> account) override {
    return Tensor::Empty(dtype, std::move(shape), device, std::move(account));
  }

  absl::Status CopyFromHost(const void* src, size_t bytes, Tensor& dst) override {
    if (bytes != dst.nbytes()) {
      return Error(Reason::kBadTensorData,
                   absl::StrCat("cpu: ", bytes, " bytes given for a tensor of ", dst.nbytes()));
    }
    if (bytes) std::memcpy(dst.raw(), src, bytes);
    return absl::OkStatus();
  }

  absl::Status CopyToHost(const Tensor& src, void* dst) override {
    if (src.nbytes()) std::memcpy(dst, src.raw(), src.nbytes());
    return absl::OkStatus();
  }

  absl::Status CopyOnBackend(const Tensor& src, Tensor& dst) override {
    if (src.nbytes() != dst.nbytes()) {
      return Error(Reason::kInternal, absl::StrCat("cpu: copy of ", src.nbytes(),
                                                   " bytes into a tensor of ", dst.nbytes()));
    }
    if (src.nbytes()) std::memcpy(dst.raw(), src.raw(), src.nbytes());
    return absl::OkStatus();
  }

  absl::Status Synchronize(const std::string&) override { return absl::OkStatus(); }

  absl::Status Run(const KernelPlan& plan, KernelCall& call) override {
    const auto* kernel = static_cast<const cpu::Kernel*>(plan.kernel);
    if (threads_ > 0) cpu::UseTeam(threads_);
    // A planned call finds the primitives its last run looked up in its memo, by position.
    cpu::onednn::CallMemo* memo = nullptr;
    if (call.memo != nullptr) {
      if (call.memo->state == nullptr) call.memo->state = std::make_shared<cpu::onednn::CallMemo>();
      memo = static_cast<cpu::onednn::CallMemo*>(call.memo->state.get());
    }
    const cpu::onednn::MemoScope scope(memo);
    // Kernels report errors as statuses; an allocation failure deep inside a library is
    // the one exception that can still escape, and it must not take the server down.
    try {
      return kernel->run(call);
    } catch (const std::bad_alloc&) {
      return Error(Reason::kOutOfMemory, absl::StrCat("cpu: out of memory in ", call.op.name),
                   {{"op", call.op.name}});
    }
  }

 private:
  const int threads_;
  const std::vector<DeviceInfo> devices_;
};

}  // namespace

std::unique_ptr<Backend> MakeCpuBackend(const CpuBackendOptions& options) {
  if (options.primitive_cache_capacity.has_value()) {
    cpu::onednn::SetCacheCapacity(static_cast<size_t>(*options.primitive_cache_capacity));
  }
  return std::make_unique<CpuBackend>(options.threads);
}

}  // namespace tensord
