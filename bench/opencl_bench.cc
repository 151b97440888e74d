// OpenCL backend benchmark, all in one process. Prints:
//   1. GEMM n x n (f32) through the dispatcher on opencl:0 vs CLBlast called directly on the
//      same device and queue (target ratio >= 0.9);
//   2. an MLP training step (linear-relu-linear, MSE, backward) on opencl:0 and on the CPU, with
//      the device buffers the driver allocated per step after the first (the block cache's
//      goal: 0);
//   3. the kernel cache: the first call of an op in the process (kernel compiled, or loaded
//      from the driver's disk cache) vs later calls (in memory);
//   4. the convolutions of bench/models.py's CNN and residual block, forward and forward +
//      backward, through the device's GEMM vs the direct kernels (conv_gemm.h).
// On PoCL (OpenCL on the CPU) the figures say what tensord adds to the device's own work, not
// how fast a GPU is. Usage: opencl_bench [--quick]
#include <clblast.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <vector>

#include "bench_timing.h"
#include "server/backends/gpu/conv_gemm.h"
#include "server/backends/opencl/opencl_runtime.h"
#include "server/backends/registered_backends.h"
#include "server/core/device_block_cache.h"
#include "server/core/status.h"
#include "server/dispatch/dispatcher.h"

namespace tensord {
namespace {

using bench::Clock;
using bench::MedianSeconds;

Tensor Filled(const Dispatcher& d, const std::string& device, Shape shape, double v) {
  CallEnv env;
  env.device = device;
  env.no_grad = true;
  return d.Call("full", {}, {{"shape", shape}, {"value", v}}, env).value()[0];
}

void Sync(const Dispatcher& d, const std::string& device) {
  d.BackendFor(device).value()->Synchronize(device).IgnoreError();
}

int Main(bool quick) {
  Dispatcher d(OpRegistry::Builtin(), MakeBackends());
  const std::string dev = "opencl:0";
  if (!d.BackendFor(dev).ok()) {
    std::printf("opencl_bench: no %s on this machine\n", dev.c_str());
    return 1;
  }
  std::shared_ptr<opencl::ClDevice> cl = opencl::Devices()[0];
  CallEnv env;
  env.device = dev;
  env.no_grad = true;

  // 3 first: the first mm of the process compiles (or loads) CLBlast's kernels.
  const int64_t small = 64;
  Tensor sa = Filled(d, dev, {small, small}, 1), sb = Filled(d, dev, {small, small}, 2);
  auto t0 = Clock::now();
  d.Call("atan2", {sa, sb}, {}, env).value();
  Sync(d, dev);
  const double first = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cached = MedianSeconds(2, 20, [&] {
    d.Call("atan2", {sa, sb}, {}, env).value();
    Sync(d, dev);
  });
  std::printf("kernel cache: first call %.1f ms, cached call %.3f ms (%.0fx)\n", first * 1e3,
              cached * 1e3, first / cached);

  for (int64_t n : quick ? std::vector<int64_t>{128} : std::vector<int64_t>{256, 512}) {
    Tensor a = Filled(d, dev, {n, n}, 0.5), b = Filled(d, dev, {n, n}, 0.25);
    Tensor c = Filled(d, dev, {n, n}, 0);
    const int reps = quick ? 3 : 9;
    const double ours = MedianSeconds(1, reps, [&] {
      d.Call("mm", {a, b}, {}, env).value();
      Sync(d, dev);
    });
    cl_command_queue q = cl->CurrentQueue().value();
    const double direct = MedianSeconds(1, reps, [&] {
      clblast::Gemm<float>(clblast::Layout::kRowMajor, clblast::Transpose::kNo,
                           clblast::Transpose::kNo, n, n, n, 1.0f,
                           static_cast<cl_mem>(const_cast<void*>(a.raw())), 0, n,
                           static_cast<cl_mem>(const_cast<void*>(b.raw())), 0, n, 0.0f,
                           static_cast<cl_mem>(c.raw()), 0, n, &q);
      clFinish(q);
    });
    const double gflops = 2.0 * n * n * n / ours / 1e9;
    std::printf(
        "gemm %lldx%lld f32: tensord %.2f ms (%.1f GFLOP/s), CLBlast direct %.2f ms, "
        "ratio %.2f (target >= 0.9)\n",
        static_cast<long long>(n), static_cast<long long>(n), ours * 1e3, gflops, direct * 1e3,
        direct / ours);
  }

  // Long reductions: a full sum and row sums of 1,024 (each a work group's tree where the
  // device folds long groups so, TENSORD_GPU_TREE_REDUCTIONS=on forces it) beside rows of
  // 1,023 (one work item a row, the group kernel), the same bytes read.
  {
    const int64_t rows = quick ? 256 : 4096;
    Tensor full = Filled(d, dev, {rows * 1024}, 0.5);
    Tensor long_rows = Filled(d, dev, {rows, 1024}, 0.5);
    Tensor short_rows = Filled(d, dev, {rows, 1023}, 0.5);
    auto time_sum = [&](const Tensor& x, const AttrMap& attrs) {
      return MedianSeconds(1, quick ? 3 : 9, [&] {
        d.Call("sum", {x}, attrs, env).value();
        Sync(d, dev);
      });
    };
    const AttrMap last = {{"dim", std::vector<int64_t>{1}}};
    std::printf(
        "long sums (%s): all %lld f32 %.2f ms; rows [%lld, 1024] %.2f ms; rows [%lld, 1023] "
        "(a work item a row) %.2f ms\n",
        cl->tree_reductions() ? "work-group trees" : "a work item a group",
        static_cast<long long>(rows * 1024), time_sum(full, {}) * 1e3, static_cast<long long>(rows),
        time_sum(long_rows, last) * 1e3, static_cast<long long>(rows),
        time_sum(short_rows, last) * 1e3);
  }

  // Sorting a long line (merge passes) and short lines (the rank sort).
  {
    const int64_t n = quick ? 8192 : 65536;
    CallEnv seeded = env;
    Tensor line =
        d.Call("rand", {}, {{"shape", Shape{n}}, {"seed", int64_t{1}}}, seeded).value()[0];
    Tensor rows = d.Call("rand", {}, {{"shape", Shape{n / 256, 256}}, {"seed", int64_t{2}}}, seeded)
                      .value()[0];
    auto time_sort = [&](const Tensor& x) {
      return MedianSeconds(1, quick ? 3 : 5, [&] {
        d.Call("sort", {x}, {{"dim", int64_t{-1}}}, env).value();
        Sync(d, dev);
      });
    };
    std::printf(
        "sort: a line of %lld f32 (merge passes) %.2f ms; %lld lines of 256 (rank sort) %.2f ms\n",
        static_cast<long long>(n), time_sort(line) * 1e3, static_cast<long long>(n / 256),
        time_sort(rows) * 1e3);
  }

  // 4. Convolutions (3x3, padding 1) through the GEMM and as direct kernels.
  {
    struct ConvShape {
      int64_t n, cin, size, cout;
    };
    const std::vector<ConvShape> shapes =
        quick ? std::vector<ConvShape>{{8, 16, 16, 32}}
              : std::vector<ConvShape>{{64, 3, 32, 16}, {64, 16, 16, 32}, {32, 32, 32, 32}};
    for (const ConvShape& c : shapes) {
      Tensor x = Filled(d, dev, {c.n, c.cin, c.size, c.size}, 0.5);
      Tensor w = Filled(d, dev, {c.cout, c.cin, 3, 3}, 0.25);
      const AttrMap attrs = {{"padding", std::vector<int64_t>{1}}};
      double times[2][2];  // [gemm, direct][forward, forward + backward]
      for (int path = 0; path < 2; ++path) {
        gpu::SetConvThroughGemm(path == 0);
        times[path][0] = MedianSeconds(1, quick ? 3 : 5, [&] {
          d.Call("conv2d", {x, w}, attrs, env).value();
          Sync(d, dev);
        });
        times[path][1] = MedianSeconds(1, quick ? 3 : 5, [&] {
          AutodiffContext ctx(1, Checkpointing::kNone);
          CallEnv train;
          train.device = dev;
          train.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
          Tensor xg = x, wg = w;
          xg.set_autograd(MakeLeafMeta(1, 1));
          wg.set_autograd(MakeLeafMeta(1, 2));
          Tensor y = d.Call("conv2d", {xg, wg}, attrs, train).value()[0];
          Tensor loss = d.Call("sum", {y}, {}, train).value()[0];
          d.Backward(ctx, {loss}, {Tensor()}, false, train).value();
          Sync(d, dev);
        });
      }
      gpu::SetConvThroughGemm(true);
      std::printf(
          "conv2d [%lld, %lld, %lld, %lld] * [%lld, %lld, 3, 3]: forward %.2f ms through the "
          "GEMM vs %.2f ms direct (%.2fx); forward + backward %.2f vs %.2f ms (%.2fx)\n",
          static_cast<long long>(c.n), static_cast<long long>(c.cin),
          static_cast<long long>(c.size), static_cast<long long>(c.size),
          static_cast<long long>(c.cout), static_cast<long long>(c.cin), times[0][0] * 1e3,
          times[1][0] * 1e3, times[1][0] / times[0][0], times[0][1] * 1e3, times[1][1] * 1e3,
          times[1][1] / times[0][1]);
    }
  }

  // 2. MLP step: x[b, 64] -> 128 -> 1.
  const int64_t batch = quick ? 32 : 256;
  for (const std::string device : {dev, std::string(kHostDevice)}) {
    Tensor x = Filled(d, device, {batch, 64}, 0.1), y = Filled(d, device, {batch, 1}, 0.5);
    Tensor w1 = Filled(d, device, {128, 64}, 0.01), b1 = Filled(d, device, {128}, 0);
    Tensor w2 = Filled(d, device, {1, 128}, 0.01), b2 = Filled(d, device, {1}, 0);
    const int reps = quick ? 3 : 9;
    auto run_step = [&] {
      AutodiffContext ctx(1, Checkpointing::kNone);
      CallEnv train;
      train.device = device;
      train.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
      std::vector<Tensor> p = {w1, b1, w2, b2};
      for (size_t i = 0; i < p.size(); ++i) p[i].set_autograd(MakeLeafMeta(1, 10 + i));
      Tensor h =
          d.Call("relu", {d.Call("linear", {x, p[0], p[1]}, {}, train).value()[0]}, {}, train)
              .value()[0];
      Tensor out = d.Call("linear", {h, p[2], p[3]}, {}, train).value()[0];
      Tensor loss = d.Call("mse_loss", {out, y}, {}, train).value()[0];
      d.Backward(ctx, {loss}, {Tensor()}, false, train).value();
      Sync(d, device);
    };
    run_step();  // the first step allocates what every step needs
    const DeviceBlockCache::Stats before = DeviceBlockCache::TotalStats();
    const opencl::ClDevice::ConstantStats constants_before = cl->constant_stats();
    const double step = MedianSeconds(0, reps, run_step);
    const DeviceBlockCache::Stats after = DeviceBlockCache::TotalStats();
    const opencl::ClDevice::ConstantStats constants_after = cl->constant_stats();
    std::printf("mlp step (batch %lld, 64-128-1, forward + backward) on %s: %.2f ms",
                static_cast<long long>(batch), device.c_str(), step * 1e3);
    if (device != kHostDevice) {
      std::printf(
          "; per step after the first: %.1f driver allocations (%.1f reused blocks), %.1f "
          "geometry buffers created (%.1f reused)",
          static_cast<double>(after.allocations - before.allocations) / reps,
          static_cast<double>(after.reuses - before.reuses) / reps,
          static_cast<double>(constants_after.created - constants_before.created) / reps,
          static_cast<double>(constants_after.hits - constants_before.hits) / reps);
    }
    std::printf("\n");
  }
  return 0;
}

}  // namespace
}  // namespace tensord

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  return tensord::Main(quick);
}
