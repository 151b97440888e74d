// The activations with a second operand or a dim on a GPU device: prelu (a slope per
// channel) and glu (halves of a dim), and their gradients, from elementwise maps, a group
// kernel (prelu's slope gradient) and window copies (glu's halves).
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/reduction_exprs.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/backends/gpu/layout_kernels.h"
#include "server/backends/gpu/reduction_kernels.h"
#include "server/core/status.h"
#include "server/ops/shape_ops.h"

namespace tensord::gpu {
namespace {

gpu::ElementwiseExpr Expr(int arity, std::string expr) {
  gpu::ElementwiseExpr e;
  e.arity = arity;
  e.expr = std::move(expr);
  return e;
}

constexpr char kSigmoidOf[] = "((T)1 / ((T)1 + exp(-";

// prelu's slope seen with x's rank: [C, 1, ...] against [N, C, ...], or one slope for all.
Shape SlopeView(const Tensor& x, const Tensor& w) {
  if (w.numel() == 1 || x.rank() < 2) return {};
  Shape s(x.rank() - 1, 1);
  s[0] = w.numel();
  return s;
}

absl::Status RunPrelu(KernelCall& c, DeviceRuntime& device, bool backward) {
  const Tensor& x = c.inputs[backward ? 1 : 0];
  const Tensor& w = c.inputs[backward ? 2 : 1];
  const Shape slope = SlopeView(x, w);
  const Tensor w_view = w.Reshaped(slope);
  if (!backward) {
    const gpu::Geometry g = gpu::BroadcastGeometry(x.shape(), {x.shape(), slope});
    return LaunchMap(device, "prelu", Expr(2, "a > (T)0 ? a : b * a"), x.dtype(), {x, w_view}, g,
                     c.outputs[0]);
  }
  const Tensor& grad = c.inputs[0];
  const gpu::Geometry g = gpu::BroadcastGeometry(x.shape(), {x.shape(), x.shape(), slope});
  RETURN_IF_ERROR(LaunchMap(device, "prelu_backward", Expr(3, "b > (T)0 ? a : c * a"), x.dtype(),
                            {grad, x, w_view}, g, c.outputs[0]));
  return LaunchGroup(device, "prelu_weight_grad",
                     gpu::PreluWeightGradPlan(x.rank(), !slope.empty(), x.dtype()), {grad, x},
                     c.outputs[1], nullptr);
}

// glu's halves of x along dim, as contiguous temporaries.
absl::StatusOr<std::vector<Tensor>> Halves(KernelCall& c, DeviceRuntime& device, const Tensor& x,
                                           int64_t dim) {
  Shape half = x.shape();
  half[dim] /= 2;
  std::vector<Tensor> out;
  const std::vector<int64_t> strides = ContiguousStrides(x.shape());
  for (int k = 0; k < 2; ++k) {
    ASSIGN_OR_RETURN(Tensor t, Tensor::EmptyOn(device.shared_from_this(), x.dtype(), half,
                                               x.device(), c.account));
    const ops::WindowCopy w{
        0, 0, half, k * half[dim] * strides[dim], strides, 0, ContiguousStrides(half)};
    RETURN_IF_ERROR(CopyWindow(device, x, t, w));
    out.push_back(t);
  }
  return out;
}

absl::Status RunGlu(KernelCall& c, DeviceRuntime& device, bool backward) {
  const Tensor& x = c.inputs[backward ? 1 : 0];
  ASSIGN_OR_RETURN(int64_t dim, ops::WrapDim(c.op.name, "dim", c.attrs.GetInt("dim"), x.rank()));
  ASSIGN_OR_RETURN(std::vector<Tensor> ab, Halves(c, device, x, dim));
  const Shape& half = ab[0].shape();
  const gpu::Geometry g = gpu::BroadcastGeometry(half, {half, half, half});
  if (!backward) {
    return LaunchMap(device, "glu", Expr(2, absl::StrCat("a * ", kSigmoidOf, "b)))")), x.dtype(),
                     ab, g, c.outputs[0]);
  }
  // d/da = g sig(b), d/db = g a sig(b) (1 - sig(b)), written into the halves of the gradient.
  const Tensor& grad = c.inputs[0];
  const std::string sig = absl::StrCat(kSigmoidOf, "c)))");
  const std::vector<gpu::ElementwiseExpr> parts = {
      Expr(3, absl::StrCat("a * ", sig)),
      Expr(3, absl::StrCat("a * b * ", sig, " * ((T)1 - ", sig, ")"))};
  const std::vector<int64_t> strides = ContiguousStrides(x.shape());
  for (int k = 0; k < 2; ++k) {
    ASSIGN_OR_RETURN(Tensor part, Tensor::EmptyOn(device.shared_from_this(), x.dtype(), half,
                                                  x.device(), c.account));
    RETURN_IF_ERROR(LaunchMap(device, k == 0 ? "glu_grad_a" : "glu_grad_b", parts[k], x.dtype(),
                              {grad, ab[0], ab[1]}, g, part));
    const ops::WindowCopy w{
        0, 0, half, 0, ContiguousStrides(half), k * half[dim] * strides[dim], strides};
    RETURN_IF_ERROR(CopyWindow(device, part, c.outputs[0], w));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterActivationKernels(GpuKernelTable& t) {
  t.Add("prelu", KernelOf(RunPrelu, false));
  t.Add("prelu_backward", KernelOf(RunPrelu, true));
  t.Add("glu", KernelOf(RunGlu, false));
  t.Add("glu_backward", KernelOf(RunGlu, true));
}

}  // namespace tensord::gpu
