// The creation ops that compute their values (arange, eye) and the random ones (rand, randn,
// native_dropout) on a GPU device (gpu/creation_source.h). They compute in double, so they
// need a device with fp64.
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/codegen/creation_source.h"
#include "server/backends/gpu/kernel_table.h"
#include "server/backends/gpu/launch.h"
#include "server/core/status.h"
#include "server/ops/random_stream.h"

namespace tensord::gpu {
namespace {

// What a computed creation op computes (bound at registration).
enum class Created { kArange, kEye, kRandint, kRand, kRandn, kDropout };

absl::Status RunComputedCreation(KernelCall& c, DeviceRuntime& device, Created op) {
  Tensor& out = c.outputs[0];
  if (out.numel() == 0) return absl::OkStatus();
  const DType dtype = out.dtype();
  const std::string name = absl::StrCat("td_", c.op.name, "_", DTypeName(dtype));
  std::function<std::string(const Dialect&)> render;
  if (op == Created::kArange) {
    render = [&](const Dialect& dialect) { return gpu::RenderArange(dialect, name, dtype); };
  } else if (op == Created::kEye) {
    render = [&](const Dialect& dialect) { return gpu::RenderEye(dialect, name, dtype); };
  } else if (op == Created::kRandint) {
    render = [&](const Dialect& dialect) { return gpu::RenderRandint(dialect, name, dtype); };
  } else {
    const gpu::Stream what = op == Created::kRand    ? gpu::Stream::kUniform
                             : op == Created::kRandn ? gpu::Stream::kNormal
                                                     : gpu::Stream::kDropout;
    render = [&, what](const Dialect& dialect) {
      return gpu::RenderStream(dialect, name, dtype, what);
    };
  }
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  std::optional<Operand> x_arg;
  if (op == Created::kDropout) {
    ASSIGN_OR_RETURN(Operand x, Operand::Of(c.inputs[0], device));
    x_arg.emplace(std::move(x));
  }
  Launch launch({name, name, render}, out.numel());
  Args& args = launch.args;
  args.AddMem(out_arg);
  if (x_arg) args.AddMem(*x_arg);
  args.Add(static_cast<int64_t>(out.numel()));
  if (op == Created::kArange) {
    // Integers given as integers are used as they are (no rounding through a double).
    const double start = c.attrs.GetNumber("start"), step = c.attrs.GetNumber("step");
    const int64_t start_int =
        c.attrs.HoldsInt("start") ? c.attrs.GetInt("start") : static_cast<int64_t>(start);
    const int64_t step_int =
        c.attrs.HoldsInt("step") ? c.attrs.GetInt("step") : static_cast<int64_t>(step);
    args.Add(static_cast<double>(start))
        .Add(static_cast<double>(step))
        .Add(static_cast<int64_t>(start_int))
        .Add(static_cast<int64_t>(step_int));
  } else if (op == Created::kEye) {
    args.Add(static_cast<int64_t>(out.dim(1)));
  } else if (op == Created::kRandint) {
    const int64_t low = c.attrs.GetInt("low");
    const uint64_t range =
        static_cast<uint64_t>(c.attrs.GetInt("high")) - static_cast<uint64_t>(low);
    args.Add(static_cast<uint64_t>(ops::StreamStart(c.attrs)))
        .Add(static_cast<int64_t>(low))
        .Add(static_cast<uint64_t>(range))
        .Add(static_cast<uint64_t>((0 - range) % range));
  } else if (op == Created::kDropout) {
    const double p = c.attrs.GetFloat("p");
    args.Add(static_cast<uint64_t>(ops::DropoutStreamStart(c.attrs.GetInt("seed"))))
        .Add(static_cast<double>(p))
        .AddScalar(dtype, p < 1.0 ? 1.0 / (1.0 - p) : 0.0);
  } else {
    args.Add(static_cast<uint64_t>(ops::StreamStart(c.attrs)))
        .Add(static_cast<double>(0))
        .AddScalar(dtype, 0);
  }
  return Enqueue(device, launch);
}

}  // namespace

void RegisterCreationKernels(GpuKernelTable& t) {
  // Their streams and steps are computed in double, as the CPU computes them (a float stream
  // would give other numbers).
  for (const auto& [op, what] :
       {std::pair{"arange", Created::kArange}, std::pair{"eye", Created::kEye},
        std::pair{"randint", Created::kRandint}, std::pair{"rand", Created::kRand},
        std::pair{"randn", Created::kRandn}, std::pair{"native_dropout", Created::kDropout}}) {
    GpuKernel k = KernelOf(RunComputedCreation, what);
    k.needs_fp64 = true;
    t.Add(op, std::move(k));
  }
}

}  // namespace tensord::gpu
