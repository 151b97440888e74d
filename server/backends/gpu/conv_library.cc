#include "server/backends/gpu/conv_library.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "server/backends/gpu/launch.h"
#include "server/core/matmul_precision.h"
#include "server/core/status.h"

namespace tensord::gpu {
namespace {

std::atomic<bool>& ThroughLibrary() {
  static std::atomic<bool> on{[] {
    const char* v = std::getenv("TENSORD_CONV_LIBRARY");
    return v == nullptr || std::string(v) != "off";
  }()};
  return on;
}

std::atomic<int64_t> runs{0};

}  // namespace

absl::StatusOr<bool> ConvThroughLibrary(DeviceRuntime& device, ConvPass pass,
                                        const nn::Correlation& g, const Tensor& a, const Tensor& b,
                                        const Tensor* bias, Tensor& out,
                                        std::shared_ptr<MemoryAccount> account) {
  if (!ThroughLibrary().load()) return false;
  ConvolutionShape shape;
  shape.pass = pass;
  shape.g = g;
  shape.dtype = out.dtype();
  shape.precision = MatmulPrecisionScope::Current();
  // The workspace first, as large as the session may have one tensor (kMaxConvWorkspaceBytes at
  // most); where the quota or the device's memory refuses it, an algorithm that needs none, if
  // the library has one. Nothing is enqueued before, so the layer's own passes can still run.
  size_t max_workspace = kMaxConvWorkspaceBytes;
  if (account != nullptr) {
    max_workspace = std::min<size_t>(
        max_workspace, static_cast<size_t>(std::max<int64_t>(0, account->max_charge_bytes())));
  }
  ASSIGN_OR_RETURN(std::optional<size_t> workspace_bytes,
                   device.ConvolutionWorkspace(shape, max_workspace));
  if (!workspace_bytes.has_value()) return false;
  Tensor workspace;
  if (*workspace_bytes > 0) {
    absl::StatusOr<Tensor> made =
        Tensor::EmptyOn(device.shared_from_this(), DType::kU8,
                        {static_cast<int64_t>(*workspace_bytes)}, out.device(), account);
    if (made.ok()) {
      workspace = *std::move(made);
    } else {
      ASSIGN_OR_RETURN(workspace_bytes, device.ConvolutionWorkspace(shape, 0));
      if (!workspace_bytes.has_value()) return false;
    }
  }
  ASSIGN_OR_RETURN(Operand a_arg, Operand::Of(a, device));
  ASSIGN_OR_RETURN(Operand b_arg, Operand::Of(b, device));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  Operand workspace_arg;
  if (*workspace_bytes > 0) {
    ASSIGN_OR_RETURN(workspace_arg, Operand::Of(workspace, device));
  }
  RETURN_IF_ERROR(device.Convolution(shape, a_arg.block(), b_arg.block(), out_arg.mutable_block(),
                                     workspace_arg.mutable_block(), *workspace_bytes));
  runs.fetch_add(1);
  if (bias != nullptr) {
    // One value per channel: [C] viewed as [C, 1, ...] over the spatial dims of the weights (b).
    Shape per_channel(b.rank() - 1, 1);
    per_channel[0] = bias->numel();
    RETURN_IF_ERROR(AddInPlace(device, bias->Reshaped(std::move(per_channel)), out));
  }
  return true;
}

int64_t ConvLibraryRuns() { return runs.load(); }

void SetConvThroughLibrary(bool on) { ThroughLibrary().store(on); }

}  // namespace tensord::gpu
