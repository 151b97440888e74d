#include "server/backends/opencl/opencl_creation.h"

#include <functional>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/creation_source.h"
#include "server/backends/opencl/opencl_elementwise.h"
#include "server/core/status.h"
#include "server/ops/random_stream.h"

namespace tensord::opencl {
namespace {

const gpu::Dialect& Cl() { return gpu::OpenClDialect(); }

absl::StatusOr<BuiltKernel*> Build(ClDevice& device, const std::string& name,
                                   const std::function<std::string()>& render) {
  return device.Kernel(name, name, render);
}

}  // namespace

bool IsComputedCreationOp(const std::string& op) {
  return op == "arange" || op == "eye" || op == "rand" || op == "randn" || op == "randint" ||
         op == "native_dropout";
}

absl::Status RunComputedCreation(KernelCall& c, ClDevice& device) {
  const std::string& op = c.op.name;
  Tensor& out = c.outputs[0];
  if (out.numel() == 0) return absl::OkStatus();
  const DType dtype = out.dtype();
  const std::string name = absl::StrCat("td_", op, "_", DTypeName(dtype));
  BuiltKernel* built = nullptr;
  if (op == "arange") {
    ASSIGN_OR_RETURN(built,
                     Build(device, name, [&] { return gpu::RenderArange(Cl(), name, dtype); }));
  } else if (op == "eye") {
    ASSIGN_OR_RETURN(built, Build(device, name, [&] { return gpu::RenderEye(Cl(), name, dtype); }));
  } else if (op == "randint") {
    ASSIGN_OR_RETURN(built,
                     Build(device, name, [&] { return gpu::RenderRandint(Cl(), name, dtype); }));
  } else {
    const gpu::Stream what = op == "rand"    ? gpu::Stream::kUniform
                             : op == "randn" ? gpu::Stream::kNormal
                                             : gpu::Stream::kDropout;
    ASSIGN_OR_RETURN(
        built, Build(device, name, [&] { return gpu::RenderStream(Cl(), name, dtype, what); }));
  }
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  std::optional<Operand> x_arg;
  if (op == "native_dropout") {
    ASSIGN_OR_RETURN(Operand x, Operand::Of(c.inputs[0], device));
    x_arg.emplace(std::move(x));
  }
  return SetAndLaunch(device, built, name, out.numel(), [&](Args& args) {
    args.AddMem(out_arg);
    if (x_arg) args.AddMem(*x_arg);
    args.Add(static_cast<cl_long>(out.numel()));
    if (op == "arange") {
      // Integers given as integers are used as they are (no rounding through a double).
      const double start = c.attrs.GetNumber("start"), step = c.attrs.GetNumber("step");
      const int64_t start_int =
          c.attrs.HoldsInt("start") ? c.attrs.GetInt("start") : static_cast<int64_t>(start);
      const int64_t step_int =
          c.attrs.HoldsInt("step") ? c.attrs.GetInt("step") : static_cast<int64_t>(step);
      args.Add(static_cast<cl_double>(start))
          .Add(static_cast<cl_double>(step))
          .Add(static_cast<cl_long>(start_int))
          .Add(static_cast<cl_long>(step_int));
    } else if (op == "eye") {
      args.Add(static_cast<cl_long>(out.dim(1)));
    } else if (op == "randint") {
      const int64_t low = c.attrs.GetInt("low");
      const uint64_t range =
          static_cast<uint64_t>(c.attrs.GetInt("high")) - static_cast<uint64_t>(low);
      args.Add(static_cast<cl_ulong>(ops::StreamStart(c.attrs)))
          .Add(static_cast<cl_long>(low))
          .Add(static_cast<cl_ulong>(range))
          .Add(static_cast<cl_ulong>((0 - range) % range));
    } else if (op == "native_dropout") {
      const double p = c.attrs.GetFloat("p");
      args.Add(static_cast<cl_ulong>(ops::DropoutStreamStart(c.attrs.GetInt("seed"))))
          .Add(static_cast<cl_double>(p))
          .AddScalar(dtype, p < 1.0 ? 1.0 / (1.0 - p) : 0.0);
    } else {
      args.Add(static_cast<cl_ulong>(ops::StreamStart(c.attrs)))
          .Add(static_cast<cl_double>(0))
          .AddScalar(dtype, 0);
    }
  });
}

}  // namespace tensord::opencl
