// Loop kernels of the linear-algebra ops: the portable reference for every float dtype and the
// f64 path (oneDNN's matmul is f32 only here).
#include "server/backends/cpu/linalg_kernels.h"

#include <algorithm>
#include <cstring>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cpu {
namespace {

template <typename T>
void AddRowBias(const GemmProblem& p) {
  if (p.bias == nullptr) return;
  const T* bias = static_cast<const T*>(p.bias);
  T* c = static_cast<T*>(p.c);
  const int64_t rows = p.batch_count() * p.n;
  for (int64_t r = 0; r < rows; ++r) {
    T* row = c + r * p.m;
    for (int64_t j = 0; j < p.m; ++j) row[j] += bias[p.bias_n == 1 ? 0 : j];
  }
}

// One matrix product c = op(a) · op(b), c zero-filled by the caller.
template <typename T>
void MatrixProduct(const GemmProblem& p, const T* a, const T* b, T* c) {
  const int64_t n = p.n, k = p.k, m = p.m;
  // Element (i, q) of op(a) is a[i * ars + q * acs]; (q, j) of op(b) is b[q * brs + j * bcs].
  const int64_t ars = p.ta ? 1 : k, acs = p.ta ? n : 1;
  const int64_t brs = p.tb ? 1 : m, bcs = p.tb ? k : 1;
  if (!p.tb) {
    // i-q-j order: the innermost loop streams rows of b and c.
    for (int64_t i = 0; i < n; ++i) {
      T* ci = c + i * m;
      for (int64_t q = 0; q < k; ++q) {
        const T av = a[i * ars + q * acs];
        const T* bq = b + q * brs;
        for (int64_t j = 0; j < m; ++j) ci[j] += av * bq[j];
      }
    }
    return;
  }
  // b stored [m, k]: a dot product per output element over contiguous rows of b.
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < m; ++j) {
      const T* bj = b + j * bcs;
      T acc = 0;
      for (int64_t q = 0; q < k; ++q) acc += a[i * ars + q * acs] * bj[q];
      c[i * m + j] = acc;
    }
  }
}

template <typename T>
absl::Status RunLoopGemm(KernelCall& call, GemmForm form) {
  ASSIGN_OR_RETURN(GemmProblem p, GemmFor(call, form));
  SimplifyGemm(p);
  LoopGemm<T>(p);
  if (p.unfused_bias != nullptr) AddBroadcastBias(*p.unfused_bias, call.outputs[0]);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GemmProblem> GemmFor(const KernelCall& call, GemmForm form) {
  const std::string& op = call.op.name;
  const Tensor& x = call.inputs[0];
  const Tensor& w = call.inputs[1];
  GemmProblem p;
  p.dtype = x.dtype();
  p.a = x.raw();
  p.b = w.raw();
  p.c = call.outputs[0].raw();
  if (form == GemmForm::kLinear) {
    // x [..., in] as rows; weight [out, in] read transposed, or a 1-d weight [in] as a column.
    p.k = x.shape().back();
    p.n = NumElements(absl::MakeConstSpan(x.shape()).first(x.rank() - 1));
    p.m = w.rank() == 2 ? w.dim(0) : 1;
    p.tb = w.rank() == 2;
    if (call.inputs.size() == 3) {
      const Tensor& bias = call.inputs[2];
      const bool per_column = w.rank() == 2 && bias.rank() == 1 && bias.dim(0) == p.m;
      if (bias.numel() == 1 || per_column) {
        p.bias = bias.raw();
        p.bias_n = bias.numel() == 1 ? 1 : p.m;
      } else {
        p.unfused_bias = &bias;
      }
    }
    return p;
  }
  nn::MatmulPlan plan;
  if (form == GemmForm::kBatchMatmul) {
    ASSIGN_OR_RETURN(
        plan, nn::PlanBatchMatmul(op, x.shape(), w.shape(), call.attrs.GetBool("transpose_a"),
                                  call.attrs.GetBool("transpose_b")));
    p.ta = call.attrs.GetBool("transpose_a");
    p.tb = call.attrs.GetBool("transpose_b");
  } else {
    ASSIGN_OR_RETURN(plan, nn::PlanMatmul(op, x.shape(), w.shape()));
  }
  p.batch = plan.batch;
  p.a_batch = plan.a_batch;
  p.b_batch = plan.b_batch;
  p.n = plan.n;
  p.k = plan.k;
  p.m = plan.m;
  return p;
}

void SimplifyGemm(GemmProblem& p) {
  if (p.batch.empty()) return;
  const bool b_shared =
      std::all_of(p.b_batch.begin(), p.b_batch.end(), [](int64_t d) { return d == 1; });
  if (b_shared && !p.ta && p.a_batch == p.batch) {
    p.n *= p.batch_count();
    p.batch.clear();
    p.a_batch.clear();
    p.b_batch.clear();
    return;
  }
  if (p.batch.size() > 1 && p.a_batch == p.batch && p.b_batch == p.batch) {
    p.batch = p.a_batch = p.b_batch = {p.batch_count()};
  }
}

template <typename T>
void LoopGemm(const GemmProblem& p) {
  const int64_t count = p.batch_count();
  T* c = static_cast<T*>(p.c);
  std::fill(c, c + count * p.n * p.m, T(0));
  if (count == 0 || p.n == 0 || p.m == 0) return;
  const T* a = static_cast<const T*>(p.a);
  const T* b = static_cast<const T*>(p.b);
  const std::vector<int64_t> sa = BroadcastStrides(p.a_batch, p.batch);
  const std::vector<int64_t> sb = BroadcastStrides(p.b_batch, p.batch);
  std::vector<int64_t> index(p.batch.size(), 0);
  for (int64_t e = 0; e < count; ++e) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < index.size(); ++d) {
      oa += index[d] * sa[d];
      ob += index[d] * sb[d];
    }
    MatrixProduct<T>(p, a + oa * p.n * p.k, b + ob * p.k * p.m, c + e * p.n * p.m);
    for (int d = static_cast<int>(index.size()) - 1; d >= 0; --d) {
      if (++index[d] < p.batch[d]) break;
      index[d] = 0;
    }
  }
  AddRowBias<T>(p);
}

template void LoopGemm<float>(const GemmProblem& p);
template void LoopGemm<double>(const GemmProblem& p);

void AddBroadcastBias(const Tensor& bias, Tensor& out) {
  TENSORD_DISPATCH_FLOAT(
      out.dtype(), [&] { BinaryLoop<T, T, T>(out, bias, out, [](T a, T b) { return a + b; }); });
}

void RegisterLinalgKernels(KernelTable& t) {
  for (const GemmOp& g : kGemmOps) {
    t.Add(g.op, std::string("loop_") + g.op, kFloat,
          [form = g.form](KernelCall& call) -> absl::Status {
            if (call.inputs[0].dtype() == DType::kF32) return RunLoopGemm<float>(call, form);
            return RunLoopGemm<double>(call, form);
          });
  }
}

}  // namespace tensord::cpu
