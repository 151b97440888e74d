#include "server/backends/opencl/opencl_backend.h"

#include <algorithm>
#include <new>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/backends/opencl/opencl_kernels.h"
#include "server/backends/opencl/opencl_runtime.h"
#include "server/core/status.h"

namespace tensord {
namespace {

using opencl::ClDevice;
using opencl::ClError;

cl_mem Mem(const Tensor& t) { return static_cast<cl_mem>(const_cast<void*>(t.raw())); }

class OpenclBackend : public Backend {
 public:
  explicit OpenclBackend(const std::vector<std::string>& only) {
    const bool names_opencl = std::any_of(
        only.begin(), only.end(), [](const std::string& n) { return n.rfind("opencl:", 0) == 0; });
    for (const auto& d : opencl::Devices()) {
      if (names_opencl && std::find(only.begin(), only.end(), d->name()) == only.end()) continue;
      // A device list naming only other backends' devices serves none of these.
      if (!only.empty() && !names_opencl) continue;
      devices_.push_back(d);
      infos_.push_back({d->name(), "opencl", d->description(), d->vendor(), d->memory_bytes()});
    }
  }

  std::string kind() const override { return "opencl"; }
  std::vector<DeviceInfo> Devices() const override { return infos_; }

  bool Supports(const KernelQuery& q) const override {
    if (devices_.empty()) return false;
    // Devices differ only in fp64; a listing asks about the first.
    absl::StatusOr<ClDevice*> d = q.device.empty() ? devices_.front().get() : Find(q.device);
    return d.ok() && opencl::Supports(q, **d);
  }
  bool Implements(const OpDef& op) const override { return opencl::Implements(op); }

  absl::StatusOr<Tensor> Allocate(DType dtype, Shape shape, const std::string& device,
                                  std::shared_ptr<MemoryAccount> account) override {
    ASSIGN_OR_RETURN(ClDevice * d, Find(device));
    return Tensor::EmptyOn(d->shared_from_this(), dtype, std::move(shape), device,
                           std::move(account));
  }

  absl::Status CopyFromHost(const void* src, size_t bytes, Tensor& dst) override {
    ASSIGN_OR_RETURN(ClDevice * d, Find(dst.device()));
    if (bytes != dst.nbytes()) {
      return Error(
          Reason::kBadTensorData,
          absl::StrCat(d->name(), ": ", bytes, " bytes given for a tensor of ", dst.nbytes()));
    }
    if (bytes == 0) return absl::OkStatus();
    cl_int err =
        clEnqueueWriteBuffer(d->queue(), Mem(dst), CL_TRUE, 0, bytes, src, 0, nullptr, nullptr);
    return err == CL_SUCCESS ? absl::OkStatus() : ClError(err, "writing to the device", d->name());
  }

  // Reads wait for the kernels queued before them (one in-order queue per device): a fetch
  // sees every op of the batches that produced the tensor.
  absl::Status CopyToHost(const Tensor& src, void* dst) override {
    ASSIGN_OR_RETURN(ClDevice * d, Find(src.device()));
    if (src.nbytes() == 0) return absl::OkStatus();
    cl_int err = clEnqueueReadBuffer(d->queue(), Mem(src), CL_TRUE, 0, src.nbytes(), dst, 0,
                                     nullptr, nullptr);
    return err == CL_SUCCESS ? absl::OkStatus()
                             : ClError(err, "reading from the device", d->name());
  }

  absl::Status CopyOnBackend(const Tensor& src, Tensor& dst) override {
    ASSIGN_OR_RETURN(ClDevice * from, Find(src.device()));
    ASSIGN_OR_RETURN(ClDevice * to, Find(dst.device()));
    if (src.nbytes() != dst.nbytes()) {
      return Error(Reason::kInternal, absl::StrCat("opencl: copy of ", src.nbytes(),
                                                   " bytes into a tensor of ", dst.nbytes()));
    }
    if (src.nbytes() == 0) return absl::OkStatus();
    if (from == to) {
      cl_int err = clEnqueueCopyBuffer(to->queue(), Mem(src), Mem(dst), 0, 0, src.nbytes(), 0,
                                       nullptr, nullptr);
      return err == CL_SUCCESS ? absl::OkStatus()
                               : ClError(err, "copying on the device", to->name());
    }
    // Two devices have two contexts: through the host.
    std::string staging(src.nbytes(), '\0');
    RETURN_IF_ERROR(CopyToHost(src, staging.data()));
    return CopyFromHost(staging.data(), staging.size(), dst);
  }

  absl::Status Run(KernelCall& call) override {
    const std::string& device = call.outputs.empty() || !call.outputs[0].defined()
                                    ? call.inputs[0].device()
                                    : call.outputs[0].device();
    ASSIGN_OR_RETURN(ClDevice * d, Find(device));
    try {
      return opencl::Run(call, *d);
    } catch (const std::bad_alloc&) {
      return Error(Reason::kOutOfMemory,
                   absl::StrCat(d->name(), ": out of memory in ", call.op.name),
                   {{"op", call.op.name}, {"device", d->name()}});
    }
  }

  absl::Status Synchronize(const std::string& device) override {
    ASSIGN_OR_RETURN(ClDevice * d, Find(device));
    cl_int err = clFinish(d->queue());
    return err == CL_SUCCESS ? absl::OkStatus() : ClError(err, "clFinish", d->name());
  }

 private:
  absl::StatusOr<ClDevice*> Find(const std::string& device) const {
    for (const auto& d : devices_) {
      if (d->name() == device) return d.get();
    }
    return Error(Reason::kDeviceNotFound, absl::StrCat("opencl: no device '", device, "'"),
                 {{"device", device}});
  }

  std::vector<std::shared_ptr<ClDevice>> devices_;
  std::vector<DeviceInfo> infos_;
};

}  // namespace

std::unique_ptr<Backend> MakeOpenclBackend(const std::vector<std::string>& only) {
  return std::make_unique<OpenclBackend>(only);
}

}  // namespace tensord
