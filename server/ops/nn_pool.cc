// Pooling (torch.nn.functional.max_pool2d, avg_pool2d, max_pool1d, avg_pool1d,
// adaptive_avg_pool2d, adaptive_max_pool2d). The 2-d pools are primitives whose gradients are
// internal ops with kernels of their own (oneDNN's backward primitives for f32), given the
// forward's attributes. The 1-d pools insert a unit height and run the 2-d op, as PyTorch
// does, so their gradients are the 2-d ops'. The adaptive pools have windows of varying size
// (PyTorch's start = floor(i * in / out), end = ceil((i + 1) * in / out)), which oneDNN's
// uniform pooling cannot express: they are primitives with internal gradient ops of their own.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/ops/nn_geometry.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;
using Ints = std::vector<int64_t>;

OpDef PoolOp(const std::string& name) {
  OpDef d;
  d.name = name;
  d.category = "nn";
  d.input_names = {"input"};
  d.dtypes = kFloat;
  d.marking = Marking::kDifferentiable;
  return d;
}

OpDef PoolBackwardOp(const std::string& name) {
  OpDef d = PoolOp(name);
  d.input_names = {"grad_output", "input"};
  d.min_inputs = d.max_inputs = 2;
  d.marking = Marking::kUnmarked;
  d.internal = true;
  return d;
}

// ---- max_pool2d, avg_pool2d ---------------------------------------------------------------------

std::vector<AttrSpec> PoolAttrs(bool max_pool) {
  std::vector<AttrSpec> a = {RequiredIntsAttr("kernel_size"),
                             IntsAttr("stride"),
                             {"padding", AttrType::kInts, Ints{0}},
                             BoolAttr("ceil_mode", false)};
  if (max_pool) {
    a.push_back({"dilation", AttrType::kInts, Ints{1}});
    a.push_back(BoolAttr("return_indices", false));
  } else {
    a.push_back(BoolAttr("count_include_pad", true));
    a.push_back(OptionalIntAttr("divisor_override"));
  }
  return a;
}

InferFn PoolInfer(const std::string& op, bool max_pool) {
  return [op, max_pool](absl::Span<const TensorMeta> in,
                        const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(nn::Pool2dParams p, nn::ReadPool2dParams(op, a, max_pool));
    if (a.Has("divisor_override") && a.GetInt("divisor_override") == 0) {
      return AttrError(op, "divisor_override", "must not be zero");
    }
    ASSIGN_OR_RETURN(Shape out, nn::Pool2dOutputShape(op, in[0].shape, p));
    std::vector<TensorMeta> outs = {{in[0].dtype, out}};
    // return_indices: PyTorch's second output, each maximum's offset in its input plane.
    if (max_pool && a.GetBool("return_indices")) outs.push_back({DType::kI64, out});
    return outs;
  };
}

// The values' gradient; the indices output (return_indices) is not differentiable, and the
// gradient op, which recomputes the maxima, has no such attribute.
BackwardFn PoolBackward(const std::string& backward_op) {
  return [backward_op](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    AttrMap attrs = g.attrs.map();
    attrs.erase("return_indices");
    ASSIGN_OR_RETURN(Tensor gx, o.Op(backward_op, {g.grad_outputs[0], g.inputs[0]}, attrs));
    return std::vector<Tensor>{gx};
  };
}

InferFn PoolBackwardInfer(const std::string& op, bool max_pool) {
  InferFn forward = PoolInfer(op, max_pool);
  return [op, forward](absl::Span<const TensorMeta> in,
                       const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(SameDtype(op, in));
    ASSIGN_OR_RETURN(std::vector<TensorMeta> out, forward(in.subspan(1), a));
    if (out[0].shape != in[0].shape) {
      return ShapeError(
          op, absl::StrCat("output gradient ", ShapeToString(in[0].shape),
                           " does not match the forward output ", ShapeToString(out[0].shape)));
    }
    return std::vector<TensorMeta>{in[1]};
  };
}

void AddPool2d(OpRegistry& r, bool max_pool) {
  const std::string name = max_pool ? "max_pool2d" : "avg_pool2d";
  OpDef pool = PoolOp(name);
  pool.attrs = PoolAttrs(max_pool);
  pool.infer = PoolInfer(name, max_pool);
  pool.backward = PoolBackward(name + "_backward");
  pool.doc = absl::StrCat("torch.nn.functional.", name, " over [N, C, H, W] or [C, H, W] input",
                          max_pool ? "; return_indices adds the i64 offset of each maximum in "
                                     "its input plane (h * W + w), PyTorch's indices"
                                   : "");
  MustAdd(r, std::move(pool));

  OpDef back = PoolBackwardOp(name + "_backward");
  back.attrs = PoolAttrs(max_pool);
  if (max_pool) back.attrs.pop_back();  // return_indices: the gradient has one output
  back.infer = PoolBackwardInfer(name + "_backward", max_pool);
  MustAdd(r, std::move(back));
}

// ---- max_pool1d, avg_pool1d -------------------------------------------------------------------

// The 2-d pools' attributes, but avg_pool1d has no divisor_override (neither has PyTorch's).
std::vector<AttrSpec> Pool1dAttrs(bool max_pool) {
  std::vector<AttrSpec> a = PoolAttrs(max_pool);
  if (!max_pool) a.pop_back();
  return a;
}

absl::StatusOr<int64_t> OneInt(const std::string& op, const Attrs& a, const std::string& name,
                               int64_t min) {
  ASSIGN_OR_RETURN(Ints v, nn::ExpandInts(op, name, a.GetInts(name), 1));
  if (v[0] < min) {
    return AttrError(
        op, name, absl::StrCat("must be ", min == 0 ? "non-negative" : "positive", ", got ", v[0]));
  }
  return v[0];
}

// Validates a 1-d pool call and returns the attributes of the equivalent 2-d pool.
absl::StatusOr<AttrMap> Pool2dAttrsOf(const std::string& op, const Shape& input, const Attrs& a,
                                      bool max_pool) {
  ASSIGN_OR_RETURN(int64_t kernel, OneInt(op, a, "kernel_size", 1));
  int64_t stride = kernel;
  if (!a.GetInts("stride").empty()) {
    ASSIGN_OR_RETURN(stride, OneInt(op, a, "stride", 1));
  }
  ASSIGN_OR_RETURN(int64_t padding, OneInt(op, a, "padding", 0));
  int64_t dilation = 1;
  if (max_pool) {
    ASSIGN_OR_RETURN(dilation, OneInt(op, a, "dilation", 1));
  }
  const int64_t eff = (kernel - 1) * dilation + 1;
  if (padding > eff / 2) {
    return AttrError(op, "padding",
                     absl::StrCat("must be at most half of the ", max_pool ? "effective " : "",
                                  "kernel size ", eff, ", got ", padding));
  }
  if (input.size() != 2 && input.size() != 3) {
    return ShapeError(op, absl::StrCat("input must be 2-d (unbatched) or 3-d (batched), got ",
                                       ShapeToString(input)));
  }
  if (input[input.size() - 1] == 0 || input[input.size() - 2] == 0) {
    return ShapeError(
        op, absl::StrCat("input ", ShapeToString(input), " has an empty non-batch dimension"));
  }
  const bool ceil_mode = a.GetBool("ceil_mode");
  const int64_t out =
      nn::PoolOutputSize(input.back(), kernel, padding, stride, dilation, ceil_mode);
  if (out < 1) {
    return ShapeError(op, absl::StrCat("input ", ShapeToString(input), " with kernel ", kernel,
                                       " gives output length ", out, ", which is too small"));
  }
  AttrMap m = {{"kernel_size", Ints{1, kernel}},
               {"stride", Ints{1, stride}},
               {"padding", Ints{0, padding}},
               {"ceil_mode", ceil_mode}};
  if (max_pool) {
    m["dilation"] = Ints{1, dilation};
    m["return_indices"] = a.GetBool("return_indices");
  } else {
    m["count_include_pad"] = a.GetBool("count_include_pad");
  }
  return m;
}

void AddPool1d(OpRegistry& r, bool max_pool) {
  const std::string name = max_pool ? "max_pool1d" : "avg_pool1d";
  const std::string op2d = max_pool ? "max_pool2d" : "avg_pool2d";
  OpDef d = PoolOp(name);
  d.attrs = Pool1dAttrs(max_pool);
  d.doc = absl::StrCat("torch.nn.functional.", name,
                       " over [N, C, L] or [C, L] input (computed by ", op2d, ")",
                       max_pool ? "; return_indices adds the i64 position of each maximum" : "");
  d.composite = [name, op2d, max_pool](OpRunner& run, absl::Span<const Tensor> in,
                                       const Attrs& a) -> absl::StatusOr<std::vector<Tensor>> {
    ASSIGN_OR_RETURN(AttrMap attrs2d, Pool2dAttrsOf(name, in[0].shape(), a, max_pool));
    ASSIGN_OR_RETURN(Tensor x, run.Run1(opname::unsqueeze, {in[0]}, {{"dim", int64_t{-2}}}));
    ASSIGN_OR_RETURN(std::vector<Tensor> ys, run.Run(op2d, {x}, std::move(attrs2d)));
    // The values and, with return_indices, the indices: offsets h * L + w with h = 0, so the
    // 2-d indices are already the 1-d ones.
    std::vector<Tensor> outs;
    for (const Tensor& y : ys) {
      ASSIGN_OR_RETURN(Tensor squeezed, run.Run1(opname::squeeze, {y}, {{"dim", Ints{-2}}}));
      outs.push_back(std::move(squeezed));
    }
    return outs;
  };
  MustAdd(r, std::move(d));
}

// ---- adaptive pools ---------------------------------------------------------------------------

InferFn AdaptiveInfer(const std::string& op) {
  return [op](absl::Span<const TensorMeta> in,
              const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    ASSIGN_OR_RETURN(Ints size, nn::ReadAdaptiveOutputSize(op, a));
    ASSIGN_OR_RETURN(Shape out, nn::AdaptivePool2dOutputShape(op, in[0].shape, size));
    std::vector<TensorMeta> outs = {{in[0].dtype, out}};
    // adaptive_max_pool2d's return_indices: each maximum's offset in its input plane.
    if (a.GetBool("return_indices")) outs.push_back({DType::kI64, out});
    return outs;
  };
}

void AddAdaptive(OpRegistry& r, const std::string& name, bool max_pool) {
  const std::string back_name = name + "_backward";
  OpDef d = PoolOp(name);
  d.attrs = {RequiredIntsAttr("output_size")};
  if (max_pool) d.attrs.push_back(BoolAttr("return_indices", false));
  d.infer = AdaptiveInfer(name);
  // The values' gradient; indices are not differentiable, and the gradient op (which
  // recomputes the maxima) takes output_size only.
  d.backward = [back_name](const GradContext& g) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(g.run);
    ASSIGN_OR_RETURN(Tensor gx, o.Op(back_name, {g.grad_outputs[0], g.inputs[0]},
                                     {{"output_size", g.attrs.GetInts("output_size")}}));
    return std::vector<Tensor>{gx};
  };
  d.doc = absl::StrCat("torch.nn.functional.", name,
                       " over [N, C, H, W] or [C, H, W] input to output_size (oH, oW); -1 keeps "
                       "that dim's input size (PyTorch's None; the Python client sends None as -1)",
                       max_pool ? "; return_indices adds the i64 offset of each maximum in its "
                                  "input plane (h * W + w), PyTorch's indices"
                                : "");
  MustAdd(r, std::move(d));

  OpDef b = PoolBackwardOp(back_name);
  b.attrs = {RequiredIntsAttr("output_size")};
  const InferFn forward = AdaptiveInfer(back_name);
  b.infer = [back_name, forward](absl::Span<const TensorMeta> in,
                                 const Attrs& a) -> absl::StatusOr<std::vector<TensorMeta>> {
    if (in[0].dtype != in[1].dtype) {
      return DtypeError(back_name, absl::StrCat("grad_output is ", DTypeName(in[0].dtype),
                                                " but input is ", DTypeName(in[1].dtype)));
    }
    ASSIGN_OR_RETURN(std::vector<TensorMeta> out, forward(in.subspan(1), a));
    if (out[0].shape != in[0].shape) {
      return ShapeError(back_name, absl::StrCat("output gradient ", ShapeToString(in[0].shape),
                                                " does not match the forward output ",
                                                ShapeToString(out[0].shape)));
    }
    return std::vector<TensorMeta>{in[1]};
  };
  b.doc = absl::StrCat("gradient of ", name, " (used by its backward rule)");
  MustAdd(r, std::move(b));
}

}  // namespace

void RegisterPoolOps(OpRegistry& r) {
  AddPool2d(r, true);
  AddPool2d(r, false);
  AddPool1d(r, true);
  AddPool1d(r, false);
  AddAdaptive(r, "adaptive_avg_pool2d", false);
  AddAdaptive(r, "adaptive_max_pool2d", true);
}

}  // namespace tensord
