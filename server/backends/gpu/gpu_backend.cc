#include "server/backends/gpu/gpu_backend.h"

#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/core/status.h"

namespace tensord::gpu {
namespace {

class GpuBackend : public Backend {
 public:
  GpuBackend(std::string kind, std::vector<GpuDevice> devices)
      : kind_(std::move(kind)), devices_(std::move(devices)) {}

  std::string kind() const override { return kind_; }
  std::vector<DeviceInfo> Devices() const override {
    std::vector<DeviceInfo> infos;
    for (const GpuDevice& d : devices_) infos.push_back(d.info);
    return infos;
  }

  absl::StatusOr<KernelPlan> Plan(const KernelQuery& q) const override {
    if (devices_.empty()) return Error(Reason::kUnsupportedOnBackend, kind_ + ": no device");
    // Devices differ only in fp64; a listing asks about the first.
    DeviceRuntime* d = devices_.front().runtime.get();
    if (!q.device.empty()) {
      ASSIGN_OR_RETURN(d, Find(q.device));
    }
    const GpuKernel* kernel = GpuKernelTable::Get().Plan(q, *d);
    if (kernel == nullptr) {
      return Error(
          Reason::kUnsupportedOnBackend,
          absl::StrCat(d->name(), ": no kernel for ", q.op.name, " with these dtypes (",
                       q.dtypes.empty() ? "-" : DTypeName(q.dtypes[0]), "), attributes or shapes"),
          {{"op", q.op.name}, {"backend", kind_}, {"device", d->name()}});
    }
    return KernelPlan{kernel};
  }
  bool Implements(const OpDef& op) const override {
    return GpuKernelTable::Get().Find(op) != nullptr;
  }

  absl::StatusOr<Tensor> Allocate(DType dtype, Shape shape, const std::string& device,
                                  std::shared_ptr<MemoryAccount> account) override {
    ASSIGN_OR_RETURN(DeviceRuntime * d, Find(device));
    return Tensor::EmptyOn(d->shared_from_this(), dtype, std::move(shape), device,
                           std::move(account));
  }

  absl::Status CopyFromHost(const void* src, size_t bytes, Tensor& dst) override {
    ASSIGN_OR_RETURN(DeviceRuntime * d, Find(dst.device()));
    if (bytes != dst.nbytes()) {
      return Error(
          Reason::kBadTensorData,
          absl::StrCat(d->name(), ": ", bytes, " bytes given for a tensor of ", dst.nbytes()));
    }
    return d->Write(dst.raw(), 0, src, bytes);
  }

  // Reads wait for the kernels queued before them (one in-order queue per device): a fetch
  // sees every op of the batches that produced the tensor.
  absl::Status CopyToHost(const Tensor& src, void* dst) override {
    ASSIGN_OR_RETURN(DeviceRuntime * d, Find(src.device()));
    return d->Read(src.raw(), 0, dst, src.nbytes());
  }

  absl::Status CopyOnBackend(const Tensor& src, Tensor& dst) override {
    ASSIGN_OR_RETURN(DeviceRuntime * from, Find(src.device()));
    ASSIGN_OR_RETURN(DeviceRuntime * to, Find(dst.device()));
    if (src.nbytes() != dst.nbytes()) {
      return Error(Reason::kInternal, absl::StrCat(kind_, ": copy of ", src.nbytes(),
                                                   " bytes into a tensor of ", dst.nbytes()));
    }
    if (src.nbytes() == 0) return absl::OkStatus();
    if (from == to) return to->CopyOnDevice(src.raw(), dst.raw(), src.nbytes());
    // Two devices: through the host.
    std::string staging(src.nbytes(), '\0');
    RETURN_IF_ERROR(CopyToHost(src, staging.data()));
    return CopyFromHost(staging.data(), staging.size(), dst);
  }

  absl::Status Run(const KernelPlan& plan, KernelCall& call) override {
    const std::string& device = call.outputs.empty() || !call.outputs[0].defined()
                                    ? call.inputs[0].device()
                                    : call.outputs[0].device();
    ASSIGN_OR_RETURN(DeviceRuntime * d, Find(device));
    const auto* kernel = static_cast<const GpuKernel*>(plan.kernel);
    try {
      return kernel->run(call, *d);
    } catch (const std::bad_alloc&) {
      return Error(Reason::kOutOfMemory,
                   absl::StrCat(d->name(), ": out of memory in ", call.op.name),
                   {{"op", call.op.name}, {"device", d->name()}});
    }
  }

  absl::Status Synchronize(const std::string& device) override {
    ASSIGN_OR_RETURN(DeviceRuntime * d, Find(device));
    return d->Synchronize();
  }

  DeviceCollectives* Collectives(const std::string& device) override {
    absl::StatusOr<DeviceRuntime*> d = Find(device);
    return d.ok() ? (*d)->collectives() : nullptr;
  }

 private:
  absl::StatusOr<DeviceRuntime*> Find(const std::string& device) const {
    for (const GpuDevice& d : devices_) {
      if (d.info.name == device) return d.runtime.get();
    }
    return Error(Reason::kDeviceNotFound, absl::StrCat(kind_, ": no device '", device, "'"),
                 {{"device", device}});
  }

  const std::string kind_;
  const std::vector<GpuDevice> devices_;
};

}  // namespace

std::unique_ptr<Backend> MakeGpuBackend(std::string kind, std::vector<GpuDevice> devices) {
  return std::make_unique<GpuBackend>(std::move(kind), std::move(devices));
}

}  // namespace tensord::gpu
