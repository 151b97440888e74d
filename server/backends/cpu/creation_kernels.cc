// Kernels for creation ops.
#include <algorithm>
#include <cmath>

#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/ops/random_stream.h"

namespace tensord::cpu {
namespace {

void Fill(Tensor& out, double value) {
  TENSORD_DISPATCH_ALL(out.dtype(), [&] {
    T* p = out.data<T>();
    const T v = static_cast<T>(value);
    for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] = v;
  });
}

KernelFn FillWith(double value) {
  return [value](KernelCall& c) {
    Fill(c.outputs[0], value);
    return absl::OkStatus();
  };
}

absl::Status FillFromAttr(KernelCall& c) {
  Fill(c.outputs[0], c.attrs.GetFloat("value"));
  return absl::OkStatus();
}

// Values as torch computes them: floats in double from start + i * step; integer outputs from
// start and step truncated to integers first.
absl::Status ArangeKernel(KernelCall& c) {
  Tensor& out = c.outputs[0];
  const double start = c.attrs.GetNumber("start"), step = c.attrs.GetNumber("step");
  const int64_t n = out.numel();
  TENSORD_DISPATCH_NUMERIC(out.dtype(), [&] {
    T* p = out.data<T>();
    if constexpr (std::is_floating_point_v<T>) {
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(start + step * static_cast<double>(i));
    } else {
      // Integers given as integers are used as they are (no rounding through a double).
      const int64_t s =
          c.attrs.HoldsInt("start") ? c.attrs.GetInt("start") : static_cast<int64_t>(start);
      const int64_t st =
          c.attrs.HoldsInt("step") ? c.attrs.GetInt("step") : static_cast<int64_t>(step);
      for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(s + st * i);
    }
  });
  return absl::OkStatus();
}

absl::Status EyeKernel(KernelCall& c) {
  Tensor& out = c.outputs[0];
  Fill(out, 0);
  const int64_t rows = out.dim(0), cols = out.dim(1);
  TENSORD_DISPATCH_NUMERIC(out.dtype(), [&] {
    T* p = out.data<T>();
    for (int64_t i = 0; i < std::min(rows, cols); ++i) p[i * cols + i] = T(1);
  });
  return absl::OkStatus();
}

// The stream of ops/random_stream.h, drawn in order.
class Rng {
 public:
  explicit Rng(uint64_t start) : start_(start) {}
  uint64_t Next() { return ops::StreamValue(start_, ++k_); }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1p-53; }  // [0, 1)
  float UniformF() { return static_cast<float>(Next() >> 40) * 0x1p-24f; }  // [0, 1) in f32

 private:
  uint64_t start_;
  uint64_t k_ = 0;
};

Rng MakeRng(const Attrs& attrs) { return Rng(ops::StreamStart(attrs)); }

absl::Status RandKernel(KernelCall& c) {
  Tensor& out = c.outputs[0];
  Rng rng = MakeRng(c.attrs);
  TENSORD_DISPATCH_FLOAT(out.dtype(), [&] {
    T* p = out.data<T>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) {
      if constexpr (std::is_same_v<T, float>) {
        p[i] = rng.UniformF();
      } else {
        p[i] = rng.Uniform();
      }
    }
  });
  return absl::OkStatus();
}

// Box-Muller, two normals per pair of uniforms.
absl::Status RandnKernel(KernelCall& c) {
  Tensor& out = c.outputs[0];
  Rng rng = MakeRng(c.attrs);
  const int64_t n = out.numel();
  TENSORD_DISPATCH_FLOAT(out.dtype(), [&] {
    T* p = out.data<T>();
    for (int64_t i = 0; i < n; i += 2) {
      const double u1 = 1.0 - rng.Uniform();  // (0, 1]: log is finite
      const double u2 = rng.Uniform();
      const double r = std::sqrt(-2.0 * std::log(u1));
      p[i] = static_cast<T>(r * std::cos(2 * M_PI * u2));
      if (i + 1 < n) p[i + 1] = static_cast<T>(r * std::sin(2 * M_PI * u2));
    }
  });
  return absl::OkStatus();
}

absl::Status RandintKernel(KernelCall& c) {
  Tensor& out = c.outputs[0];
  const uint64_t start = ops::StreamStart(c.attrs);
  const int64_t low = c.attrs.GetInt("low");
  const uint64_t range = static_cast<uint64_t>(c.attrs.GetInt("high")) - static_cast<uint64_t>(low);
  TENSORD_DISPATCH_NUMERIC(out.dtype(), [&] {
    T* p = out.data<T>();
    for (int64_t i = 0, n = out.numel(); i < n; ++i) {
      p[i] = static_cast<T>(
          static_cast<int64_t>(static_cast<uint64_t>(low) + ops::RandintOffset(start, i, range)));
    }
  });
  return absl::OkStatus();
}

}  // namespace

void RegisterCreationKernels(KernelTable& t) {
  t.Add("zeros", "loop_fill", kAll, FillWith(0));
  t.Add("ones", "loop_fill", kAll, FillWith(1));
  t.Add("full", "loop_fill", kAll, FillFromAttr);
  t.Add("zeros_like", "loop_fill", kAll, FillWith(0));
  t.Add("ones_like", "loop_fill", kAll, FillWith(1));
  t.Add("full_like", "loop_fill", kAll, FillFromAttr);
  t.Add("arange", "loop_arange", kFloatInt, ArangeKernel);
  t.Add("eye", "loop_eye", kFloatInt, EyeKernel);
  t.Add("rand", "splitmix_uniform", kFloat, RandKernel);
  t.Add("randn", "splitmix_box_muller", kFloat, RandnKernel);
  t.Add("randint", "splitmix_randint", kFloatInt, RandintKernel);
}

}  // namespace tensord::cpu
