// Kernels for shape ops: views, the strided copy every layout change goes through, permute and
// transpose, plain copies, to_device and assign. Joins, slices and indexing have their own
// files and register from here.
#include "server/backends/cpu/shape_kernels.h"

#include <cstring>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/low_precision_cast.h"
#include "server/backends/cpu/strided_copy.h"
#include "server/ops/shape_ops.h"

namespace tensord::cpu {
namespace {

// One non-contiguous run: `n` elements `sa` apart in src, `sb` apart in dst.
template <typename T>
void CopyRun(const char* src, int64_t sa, char* dst, int64_t sb, int64_t n) {
  const T* s = reinterpret_cast<const T*>(src);
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i * sb] = s[i * sa];
}

void CopyRunBytes(size_t es, const char* src, int64_t sa, char* dst, int64_t sb, int64_t n) {
  switch (es) {
    case 1:
      return CopyRun<uint8_t>(src, sa, dst, sb, n);
    case 2:
      return CopyRun<uint16_t>(src, sa, dst, sb, n);
    case 4:
      return CopyRun<uint32_t>(src, sa, dst, sb, n);
    case 8:
      return CopyRun<uint64_t>(src, sa, dst, sb, n);
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * sb * es, src + i * sa * es, es);
  }
}

}  // namespace

void StridedCopy(size_t es, absl::Span<const int64_t> shape, const void* src,
                 absl::Span<const int64_t> src_strides, void* dst,
                 absl::Span<const int64_t> dst_strides) {
  // Collapse the iteration space: size-1 dims carry no offset, and a dim whose stride equals
  // (inner stride * inner size) on both sides continues the inner dim.
  std::vector<int64_t> n, a, b;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return;
    if (shape[d] == 1) continue;
    if (!n.empty() && a.back() == src_strides[d] * shape[d] &&
        b.back() == dst_strides[d] * shape[d]) {
      n.back() *= shape[d];
      a.back() = src_strides[d];
      b.back() = dst_strides[d];
      continue;
    }
    n.push_back(shape[d]);
    a.push_back(src_strides[d]);
    b.push_back(dst_strides[d]);
  }
  const char* s = static_cast<const char*>(src);
  char* t = static_cast<char*>(dst);
  if (n.empty()) {
    std::memcpy(t, s, es);
    return;
  }
  const int outer_rank = static_cast<int>(n.size()) - 1;
  const int64_t inner = n.back(), sa = a.back(), sb = b.back();
  const bool contiguous_run = sa == 1 && sb == 1;
  int64_t outer = 1;
  for (int d = 0; d < outer_rank; ++d) outer *= n[d];
  std::vector<int64_t> index(outer_rank, 0);
  int64_t so = 0, to = 0;  // element offsets of the current run
  for (int64_t r = 0; r < outer; ++r) {
    if (contiguous_run) {
      std::memcpy(t + to * es, s + so * es, inner * es);
    } else {
      CopyRunBytes(es, s + so * es, sa, t + to * es, sb, inner);
    }
    for (int d = outer_rank - 1; d >= 0; --d) {
      so += a[d];
      to += b[d];
      if (++index[d] < n[d]) break;
      so -= a[d] * n[d];
      to -= b[d] * n[d];
      index[d] = 0;
    }
  }
}

void CopyIntoWindow(const Tensor& src, Tensor& dst, int64_t dst_offset,
                    absl::Span<const int64_t> dst_strides) {
  const size_t es = DTypeSize(src.dtype());
  StridedCopy(es, src.shape(), src.raw(), ContiguousStrides(src.shape()),
              static_cast<char*>(dst.raw()) + dst_offset * es, dst_strides);
}

void CopyFromWindow(const Tensor& src, int64_t src_offset, absl::Span<const int64_t> src_strides,
                    Tensor& dst) {
  const size_t es = DTypeSize(src.dtype());
  StridedCopy(es, dst.shape(), static_cast<const char*>(src.raw()) + src_offset * es, src_strides,
              dst.raw(), ContiguousStrides(dst.shape()));
}

namespace {

// Views: the output shares the input's storage.
absl::Status ViewKernel(KernelCall& c) {
  c.outputs[0] = c.inputs[0].Reshaped(c.output_metas[0].shape);
  return absl::OkStatus();
}

absl::Status ExpandKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  std::vector<std::vector<int64_t>> strides = {BroadcastStrides(x.shape(), out.shape())};
  const int64_t s = strides[0].empty() ? 0 : strides[0].back();
  TENSORD_DISPATCH_ALL(x.dtype(), [&] {
    const T* p = x.data<T>();
    T* q = out.data<T>();
    ParallelBroadcastWalk(out.shape(), strides,
                          [&](const std::vector<int64_t>& off, int64_t o, int64_t len) {
                            for (int64_t i = 0; i < len; ++i) q[o + i] = p[off[0] + i * s];
                          });
  });
  return absl::OkStatus();
}

// Output dim i reads input dim perm[i].
void PermuteInto(const Tensor& x, const std::vector<int64_t>& perm, Tensor& out) {
  const std::vector<int64_t> in_strides = ContiguousStrides(x.shape());
  std::vector<int64_t> src_strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) src_strides[i] = in_strides[perm[i]];
  CopyFromWindow(x, 0, src_strides, out);
}

absl::Status PermuteKernel(KernelCall& c) {
  ASSIGN_OR_RETURN(
      auto perm, ops::NormalizePermutation("permute", c.attrs.GetInts("dims"), c.inputs[0].rank()));
  PermuteInto(c.inputs[0], perm, c.outputs[0]);
  return absl::OkStatus();
}

absl::Status TransposeKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, ops::TransposePermutation(c.attrs, x.rank()));
  PermuteInto(x, perm, c.outputs[0]);
  return absl::OkStatus();
}

absl::Status CopyKernel(KernelCall& c) {
  if (c.inputs[0].nbytes())
    std::memcpy(c.outputs[0].raw(), c.inputs[0].raw(), c.inputs[0].nbytes());
  return absl::OkStatus();
}

absl::Status AssignKernel(KernelCall& c) {
  Tensor target = c.inputs[0];  // shares the storage it writes into
  Tensor value = c.inputs[1];
  if (value.storage() == target.storage()) {
    // The value aliases the target (a view of it): read from a snapshot.
    ASSIGN_OR_RETURN(Tensor copy,
                     Tensor::Empty(value.dtype(), value.shape(), value.device(), c.account));
    if (value.nbytes()) std::memcpy(copy.raw(), value.raw(), value.nbytes());
    value = copy;
  }
  if (value.dtype() != target.dtype() &&
      (IsLowPrecision(value.dtype()) || IsLowPrecision(target.dtype()))) {
    // Convert first (value-sized), then the broadcasting copy below moves same-dtype bytes.
    ASSIGN_OR_RETURN(Tensor converted,
                     Tensor::Empty(target.dtype(), value.shape(), value.device(), c.account));
    ConvertLowPrecision(value.dtype(), value.raw(), target.dtype(), converted.raw(), value.numel());
    value = converted;
  }
  const std::vector<int64_t> strides = BroadcastStrides(value.shape(), target.shape());
  if (value.dtype() == target.dtype()) {
    StridedCopy(DTypeSize(target.dtype()), target.shape(), value.raw(), strides, target.raw(),
                ContiguousStrides(target.shape()));
  } else {
    const int64_t s = strides.empty() ? 0 : strides.back();
    TENSORD_DISPATCH_TYPED(value.dtype(), [&] {
      using In = T;
      const In* p = value.data<In>();
      TENSORD_DISPATCH_TYPED(target.dtype(), [&] {
        T* q = target.data<T>();
        ParallelBroadcastWalk(target.shape(), std::vector<std::vector<int64_t>>{strides},
                              [&](const std::vector<int64_t>& off, int64_t o, int64_t len) {
                                for (int64_t i = 0; i < len; ++i)
                                  q[o + i] = ConvertElement<T>(p[off[0] + i * s]);
                              });
      });
    });
  }
  target.storage()->BumpVersion();
  c.outputs[0] = target;
  return absl::OkStatus();
}

absl::Status CastKernel(KernelCall& c) {
  const Tensor& x = c.inputs[0];
  Tensor& out = c.outputs[0];
  if (IsLowPrecision(x.dtype()) || IsLowPrecision(out.dtype())) {
    ConvertLowPrecision(x.dtype(), x.raw(), out.dtype(), out.raw(), out.numel());
    return absl::OkStatus();
  }
  TENSORD_DISPATCH_TYPED(x.dtype(), [&] {
    using In = T;
    TENSORD_DISPATCH_TYPED(
        out.dtype(), [&] { UnaryLoop<In, T>(x, out, [](In v) { return ConvertElement<T>(v); }); });
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterShapeKernels(KernelTable& t) {
  // Kernels that move bytes without reading them as numbers also take the storage dtypes
  // (kStorage), so views stay views and copies stay copies; assign must, since it writes in
  // place.
  constexpr DTypeSet kStorage = kAll | kStorageOnly;
  t.Add("reshape", "view", kStorage, ViewKernel);
  t.Add("expand", "loop_expand", kAll, ExpandKernel);
  t.Add("to_dtype", "loop_cast", kStorage, CastKernel);
  for (const char* view : {"flatten", "squeeze", "unsqueeze", "detach"}) {
    t.Add(view, "view", kStorage, ViewKernel);
  }
  t.Add("permute", "strided_permute", kStorage, PermuteKernel);
  t.Add("transpose", "strided_permute", kStorage, TransposeKernel);
  t.Add("contiguous", "memcpy", kStorage, CopyKernel);
  t.Add("clone", "memcpy", kStorage, CopyKernel);
  t.Add("assign", "strided_assign", kStorage, AssignKernel);
  RegisterLayoutKernels(t);
  RegisterIndexingKernels(t);
  RegisterIndexingSelectKernels(t);
  RegisterPadKernels(t);
  RegisterSortingKernels(t);
}

}  // namespace tensord::cpu
