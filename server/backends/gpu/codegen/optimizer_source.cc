#include "server/backends/gpu/codegen/optimizer_source.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tensord::gpu {
namespace {

constexpr char kSgd[] = R"(
KERNEL NAME(GLOBAL T* p, GLOBAL const T* g, GLOBAL T* buf, INT64 n, T lr_neg, T momentum,
            T one_minus_dampening, T wd, int flags) {
  const INT64 i = GID;
  if (i >= n) return;
  T d = (flags & 8) ? -g[i] : g[i];
  if (flags & 1) d = d + wd * p[i];
  if (flags & 2) {
    const T b = (flags & 16) ? d : buf[i] * momentum + one_minus_dampening * d;
    buf[i] = b;
    d = (flags & 4) ? d + momentum * b : b;
  }
  p[i] = p[i] + lr_neg * d;
}
)";

constexpr char kAdam[] = R"(
KERNEL NAME(GLOBAL T* p, GLOBAL const T* g, GLOBAL T* m, GLOBAL T* v, GLOBAL T* vmax, INT64 n,
            T beta1, T one_minus_beta1, T beta2, T one_minus_beta2, T wd, T decay,
            T bc2_sqrt, T eps, T step_size_neg, int flags) {
  const INT64 i = GID;
  if (i >= n) return;
  T grad = (flags & 8) ? -g[i] : g[i];
  T param = p[i];
  if (flags & 2) {
    param = param * decay;
  } else if (flags & 1) {
    grad = grad + wd * param;
  }
  const T mi = m[i] * beta1 + one_minus_beta1 * grad;
  const T vi = v[i] * beta2 + one_minus_beta2 * grad * grad;
  m[i] = mi;
  v[i] = vi;
  T second = vi;
  if (flags & 4) {
    const T old = vmax[i];
    second = isnan(old) ? old : isnan(vi) ? vi : (old > vi ? old : vi);
    vmax[i] = second;
  }
  p[i] = param + step_size_neg * mi / (sqrt(second) / bc2_sqrt + eps);
}
)";

std::string Render(const Dialect& d, const char* body, const std::string& name, DType dtype) {
  return absl::StrCat(Preamble(d, {dtype}), "#define T ", dtype == DType::kF64 ? "double" : "float",
                      "\n",
                      absl::StrReplaceAll(body, {{"KERNEL", d.kernel},
                                                 {"GID", d.global_id},
                                                 {"GLOBAL", d.global},
                                                 {"INT64", d.int64},
                                                 {"NAME", name}}));
}

}  // namespace

std::string RenderSgd(const Dialect& d, const std::string& name, DType dtype) {
  return Render(d, kSgd, name, dtype);
}

std::string RenderAdam(const Dialect& d, const std::string& name, DType dtype) {
  return Render(d, kAdam, name, dtype);
}

}  // namespace tensord::gpu
