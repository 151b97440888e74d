// Matrix products through the runtime's GEMM: mm, bmm, matmul (batch dimensions equal,
// broadcast from a single matrix, or partly broadcast: that operand is expanded on the device
// first), linear, and the batch_matmul of their backward rules. Integer products run on the
// CPU only.

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"
#include "server/ops/nn_geometry.h"

namespace tensord::gpu {
namespace {

// How an op's operands form its product (bound at registration): matmul, mm and bmm by their
// ranks; linear with a transposed weight and an optional bias; batch_matmul with its transpose
// attributes.
enum class Product { kMatmul, kLinear, kBatchMatmul };

// The runtime's strided-batched GEMM (its dtype set at run time), and what comes before it.
struct GemmPlan : GemmShape {
  // Operands whose batch dims are partly broadcast ([2, 1] against [1, 3]): expanded to the
  // full batch (`batch_shape`) before the GEMM, which walks them contiguously then.
  bool expand_a = false, expand_b = false;
  Shape batch_shape;
};

absl::StatusOr<GemmPlan> Plan(const OpDef& op, Product form, const Attrs& attrs, const Shape& a,
                              const Shape& b) {
  GemmPlan g;
  nn::MatmulPlan p;
  if (form == Product::kLinear) {
    // input [..., in] · weight[out, in]^T: one matrix of every leading row.
    if (a.empty() || b.size() != 2) {
      return Error(Reason::kUnsupportedOnBackend, "linear of these ranks");
    }
    g.inner = static_cast<size_t>(a.back());
    g.cols = static_cast<size_t>(b[0]);
    g.rows = static_cast<size_t>(NumElements(Shape(a.begin(), a.end() - 1)));
    g.transpose_b = true;
    return g;
  }
  if (form == Product::kBatchMatmul) {
    g.transpose_a = attrs.GetBool("transpose_a");
    g.transpose_b = attrs.GetBool("transpose_b");
    ASSIGN_OR_RETURN(p, nn::PlanBatchMatmul(op.name, a, b, g.transpose_a, g.transpose_b));
  } else {
    ASSIGN_OR_RETURN(p, nn::PlanMatmul(op.name, a, b));
  }
  g.rows = static_cast<size_t>(p.n);
  g.inner = static_cast<size_t>(p.k);
  g.cols = static_cast<size_t>(p.m);
  const int64_t batch = NumElements(p.batch);
  g.batch = static_cast<size_t>(batch);
  g.batch_shape = p.batch;
  auto stride = [&](const Shape& operand_batch, size_t matrix, bool& expand) -> size_t {
    if (NumElements(operand_batch) == 1) return 0;
    // Equal batch dims after left-padding with ones are walked contiguously; others are
    // expanded to them first.
    Shape padded(p.batch.size() - operand_batch.size(), 1);
    padded.insert(padded.end(), operand_batch.begin(), operand_batch.end());
    expand = padded != p.batch;
    return matrix;
  };
  g.a_stride = stride(p.a_batch, g.rows * g.inner, g.expand_a);
  g.b_stride = stride(p.b_batch, g.inner * g.cols, g.expand_b);
  return g;
}

// Whether a linear's bias goes to the GEMM: a device that adds it, one value per output column
// (not one value broadcast), of the product's dtype.
bool BiasFitsGemm(const Shape& bias, DType bias_dtype, const Shape& weight, DType dtype,
                  const DeviceRuntime& device) {
  return device.GemmAddsBias() && bias_dtype == dtype && bias.size() == 1 && !weight.empty() &&
         bias[0] == weight[0];
}

// The dtypes the device's GEMM takes (bf16 and f16 elsewhere run in f32, storage_dtypes.h).
// A 2-byte linear with a bias only where the GEMM adds it to its f32 sums before the one
// rounding, as the product and add in f32 would, and never of an empty inner dim (whose bias
// would be added by a 2-byte map).
bool SupportsProduct(const KernelQuery& q, Product form, const DeviceRuntime& device) {
  if (q.inputs.size() < 2) return true;  // a listing
  const DType d = q.inputs[0].dtype;
  if (!device.GemmTakes(d)) return false;
  if (IsLowPrecision(d) && form == Product::kLinear && q.inputs.size() == 3 &&
      (!BiasFitsGemm(q.inputs[2].shape, q.inputs[2].dtype, q.inputs[1].shape, d, device) ||
       q.inputs[0].shape.empty() || q.inputs[0].shape.back() == 0)) {
    return false;
  }
  return Plan(q.op, form, *q.attrs, q.inputs[0].shape, q.inputs[1].shape).ok();
}

// `t` (of rank >= 2) with its batch dims expanded to `batch`, in a temporary on the device.
absl::StatusOr<Tensor> ExpandBatch(const Tensor& t, const Shape& batch, DeviceRuntime& device,
                                   std::shared_ptr<MemoryAccount> account) {
  Shape full = batch;
  full.insert(full.end(), t.shape().end() - 2, t.shape().end());
  ASSIGN_OR_RETURN(Tensor out, Tensor::EmptyOn(device.shared_from_this(), t.dtype(), full,
                                               t.device(), std::move(account)));
  RETURN_IF_ERROR(Copy(device, "expand", t, BroadcastStrides(t.shape(), full), out));
  return out;
}

absl::Status RunProduct(KernelCall& c, DeviceRuntime& device, Product form) {
  Tensor a = c.inputs[0];
  Tensor b = c.inputs[1];
  Tensor& out = c.outputs[0];
  ASSIGN_OR_RETURN(GemmPlan g, Plan(c.op, form, c.attrs, a.shape(), b.shape()));
  if (out.numel() == 0) return absl::OkStatus();
  if (g.expand_a) {
    ASSIGN_OR_RETURN(a, ExpandBatch(a, g.batch_shape, device, c.account));
  }
  if (g.expand_b) {
    ASSIGN_OR_RETURN(b, ExpandBatch(b, g.batch_shape, device, c.account));
  }
  const bool bias_in_gemm =
      form == Product::kLinear && c.inputs.size() == 3 && g.inner != 0 &&
      BiasFitsGemm(c.inputs[2].shape(), c.inputs[2].dtype(), b.shape(), a.dtype(), device);
  if (g.inner == 0) {
    RETURN_IF_ERROR(Fill(device, 0.0, out));
  } else {
    g.dtype = a.dtype();
    g.precision = MatmulPrecisionScope::Current();
    RETURN_IF_ERROR(
        device.Gemm(g, a.raw(), b.raw(), out.raw(), bias_in_gemm ? c.inputs[2].raw() : nullptr));
  }
  if (form == Product::kLinear && c.inputs.size() == 3 && !bias_in_gemm) {
    // The bias, added in place: each element reads and writes only its own place.
    RETURN_IF_ERROR(AddInPlace(device, c.inputs[2], out));
  }
  return absl::OkStatus();
}

}  // namespace

void RegisterLinalgKernels(GpuKernelTable& t) {
  for (const auto& [op, form] :
       {std::pair{"matmul", Product::kMatmul}, std::pair{"mm", Product::kMatmul},
        std::pair{"bmm", Product::kMatmul}, std::pair{"linear", Product::kLinear},
        std::pair{"batch_matmul", Product::kBatchMatmul}}) {
    GpuKernel k = KernelOf(RunProduct, form);
    k.supports = [form = form](const KernelQuery& q, const DeviceRuntime& device) {
      return SupportsProduct(q, form, device);
    };
    t.Add(op, std::move(k));
  }
}

}  // namespace tensord::gpu
