// Collectives across the ranks of the session's process group (server/distributed): ops of
// the table like any other — usable in batches and programs, recorded under autodiff and
// differentiated by rules written with other collectives, as torch.distributed.nn's are —
// that the dispatcher hands to the group instead of a backend kernel. Every rank of the
// group runs the same call; the group checks that before any data moves.
#include "absl/strings/str_cat.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"
#include "server/ops/registry.h"

namespace tensord {
namespace {

using In = const Tensor&;
using ops::GradOps;

const std::vector<std::string> kReduceOps = {"sum", "mean", "max", "min", "product"};

// The reducing collectives take the compute dtypes; mean takes floats, as torch's AVG does.
absl::Status CheckReduceDtype(const std::string& op, const TensorMeta& in, const Attrs& attrs) {
  if (attrs.GetString("op") == "mean" && !IsFloat(in.dtype)) {
    return ops::DtypeError(
        op, absl::StrCat("op='mean' needs a float tensor, got ", DTypeName(in.dtype)));
  }
  return absl::OkStatus();
}

absl::Status CheckRank(const std::string& op, const std::string& attr, const Attrs& attrs,
                       int world) {
  const int64_t r = attrs.GetInt(attr);
  if (r < 0 || r >= world) {
    return ops::AttrError(
        op, attr, absl::StrCat("rank ", r, " is not in the group (world size ", world, ")"));
  }
  return absl::OkStatus();
}

OpDef Collective(std::string name, CollectiveKind kind, DTypeSet dtypes, std::string doc) {
  OpDef op =
      ops::NewOp(std::move(name), "distributed", {"input"}, dtypes, Marking::kDifferentiable);
  op.collective = kind;
  op.widen_storage_dtypes = false;
  // Kept for backward under BALANCED checkpointing: recomputing one would be another round
  // of communication.
  op.compute_bound = true;
  op.doc = std::move(doc);
  return op;
}

// A gradient of the input's shape (all_gather's of a 0-d input comes back as [1]).
absl::StatusOr<Tensor> AsInput(GradOps& o, const Tensor& g, const Tensor& input) {
  if (g.shape() == input.shape()) return g;
  return o.Reshape(g, input.shape());
}

}  // namespace

void RegisterCollectiveOps(OpRegistry& r) {
  OpDef all_reduce = Collective(
      "all_reduce", CollectiveKind::kAllReduce, kFloatInt | kStorageOnly,
      "Every rank's input reduced elementwise over the group (op: sum, mean, max, min, "
      "product); every rank gets the result. Gradient: the all_reduce of the gradients (sum, "
      "mean), shared among the ranks holding the extreme (max, min), times the product of the "
      "other ranks' inputs (product).");
  all_reduce.attrs = {ops::StringAttr("op", "sum", kReduceOps)};
  all_reduce.collective_infer = [](absl::Span<const TensorMeta> in, const Attrs& attrs,
                                   int) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckReduceDtype("all_reduce", in[0], attrs));
    return std::vector<TensorMeta>{{in[0].dtype, in[0].shape}};
  };
  all_reduce.backward = [](const GradContext& c) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(c.run);
    const std::string op = c.attrs.GetString("op");
    In x = c.inputs[0];
    In y = c.outputs[0];
    In go = c.grad_outputs[0];
    if (op == "sum" || op == "mean") {
      ASSIGN_OR_RETURN(Tensor g, o.Op(opname::all_reduce, {go}, {{"op", op}}));
      return std::vector<Tensor>{g};
    }
    ASSIGN_OR_RETURN(Tensor g, o.Op(opname::all_reduce, {go}, {{"op", std::string("sum")}}));
    if (op == "max" || op == "min") {
      // Ties share the gradient evenly, as torch.amax's does.
      ASSIGN_OR_RETURN(Tensor hit, o.Op(opname::eq, {x, y}));
      ASSIGN_OR_RETURN(Tensor mask, o.Op(opname::to_dtype, {hit},
                                         {{"dtype", std::string(DTypeName(x.dtype()))}}));
      ASSIGN_OR_RETURN(Tensor count,
                       o.Op(opname::all_reduce, {mask}, {{"op", std::string("sum")}}));
      ASSIGN_OR_RETURN(Tensor share, o.Div(mask, count));
      ASSIGN_OR_RETURN(Tensor dx, o.Mul(g, share));
      return std::vector<Tensor>{dx};
    }
    // product: the product of the other ranks' inputs, exact when some are zero. With Z zeros
    // in the group, it is P / x when Z = 0, P (the product of the nonzero ones) on the rank
    // holding the only zero, and 0 otherwise.
    ASSIGN_OR_RETURN(Tensor zero, o.ZerosLike(x));
    ASSIGN_OR_RETURN(Tensor is_zero, o.Op(opname::eq, {x, zero}));
    ASSIGN_OR_RETURN(Tensor one, o.Op(opname::ones_like, {x}));
    ASSIGN_OR_RETURN(Tensor nonzero, o.Op(opname::where, {is_zero, one, x}));
    ASSIGN_OR_RETURN(Tensor p,
                     o.Op(opname::all_reduce, {nonzero}, {{"op", std::string("product")}}));
    ASSIGN_OR_RETURN(Tensor zeros_here, o.Op(opname::to_dtype, {is_zero},
                                             {{"dtype", std::string(DTypeName(x.dtype()))}}));
    ASSIGN_OR_RETURN(Tensor z,
                     o.Op(opname::all_reduce, {zeros_here}, {{"op", std::string("sum")}}));
    ASSIGN_OR_RETURN(Tensor no_zero, o.Op(opname::eq, {z, zero}));
    ASSIGN_OR_RETURN(Tensor one_zero, o.Op(opname::eq, {z, one}));
    ASSIGN_OR_RETURN(Tensor mine, o.Op(opname::logical_and, {one_zero, is_zero}));
    ASSIGN_OR_RETURN(Tensor p_over_x, o.Div(p, nonzero));
    ASSIGN_OR_RETURN(Tensor p_or_zero, o.Op(opname::where, {mine, p, zero}));
    ASSIGN_OR_RETURN(Tensor others, o.Op(opname::where, {no_zero, p_over_x, p_or_zero}));
    ASSIGN_OR_RETURN(Tensor dx, o.Mul(g, others));
    return std::vector<Tensor>{dx};
  };
  MustAdd(r, std::move(all_reduce));

  OpDef all_gather = Collective(
      "all_gather", CollectiveKind::kAllGather, kAll | kStorageOnly,
      "Every rank's input, concatenated along dim 0 in rank order (a 0-d input gives one "
      "element per rank); every rank gets the result. Gradient: the reduce_scatter (sum) of "
      "the gradients.");
  all_gather.collective_infer = [](absl::Span<const TensorMeta> in, const Attrs&,
                                   int world) -> absl::StatusOr<std::vector<TensorMeta>> {
    Shape shape = in[0].shape;
    if (shape.empty()) shape = {1};
    shape[0] *= world;
    return std::vector<TensorMeta>{{in[0].dtype, shape}};
  };
  all_gather.backward = [](const GradContext& c) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(c.run);
    ASSIGN_OR_RETURN(
        Tensor g, o.Op(opname::reduce_scatter, {c.grad_outputs[0]}, {{"op", std::string("sum")}}));
    ASSIGN_OR_RETURN(Tensor dx, AsInput(o, g, c.inputs[0]));
    return std::vector<Tensor>{dx};
  };
  MustAdd(r, std::move(all_gather));

  OpDef reduce_scatter = Collective(
      "reduce_scatter", CollectiveKind::kReduceScatter, kFloatInt | kStorageOnly,
      "Every rank's input reduced elementwise over the group (op: sum, mean), then split "
      "along dim 0 into world_size equal parts: rank r gets part r. Dim 0 must divide by the "
      "world size. Gradient: the all_gather of the gradients.");
  reduce_scatter.attrs = {ops::StringAttr("op", "sum", {"sum", "mean"})};
  reduce_scatter.collective_infer = [](absl::Span<const TensorMeta> in, const Attrs& attrs,
                                       int world) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckReduceDtype("reduce_scatter", in[0], attrs));
    if (in[0].shape.empty() || in[0].shape[0] % world != 0) {
      return ops::ShapeError("reduce_scatter", absl::StrCat("dim 0 of ", ShapeToString(in[0].shape),
                                                            " does not split into ", world,
                                                            " equal parts (one per rank)"));
    }
    Shape shape = in[0].shape;
    shape[0] /= world;
    return std::vector<TensorMeta>{{in[0].dtype, shape}};
  };
  reduce_scatter.backward = [](const GradContext& c) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(c.run);
    ASSIGN_OR_RETURN(Tensor g, o.Op(opname::all_gather, {c.grad_outputs[0]}));
    if (c.attrs.GetString("op") == "mean") {
      const double world = static_cast<double>(g.dim(0)) / c.grad_outputs[0].dim(0);
      ASSIGN_OR_RETURN(g, o.Scale(g, 1.0 / world));
    }
    return std::vector<Tensor>{g};
  };
  MustAdd(r, std::move(reduce_scatter));

  OpDef broadcast = Collective(
      "broadcast", CollectiveKind::kBroadcast, kAll | kStorageOnly,
      "Rank src's input, on every rank (every rank passes a tensor of the same shape and "
      "dtype). Gradient: the sum of the gradients, reduced to src; zero on the other ranks.");
  broadcast.attrs = {ops::IntAttr("src", 0)};
  broadcast.collective_infer = [](absl::Span<const TensorMeta> in, const Attrs& attrs,
                                  int world) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckRank("broadcast", "src", attrs, world));
    return std::vector<TensorMeta>{{in[0].dtype, in[0].shape}};
  };
  broadcast.backward = [](const GradContext& c) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(c.run);
    ASSIGN_OR_RETURN(Tensor g,
                     o.Op(opname::reduce, {c.grad_outputs[0]}, {{"dst", c.attrs.GetInt("src")}}));
    return std::vector<Tensor>{g};
  };
  MustAdd(r, std::move(broadcast));

  OpDef reduce = Collective(
      "reduce", CollectiveKind::kReduce, kFloatInt | kStorageOnly,
      "The sum of every rank's input, elementwise, onto rank dst; the other ranks get zeros. "
      "Gradient: rank dst's gradient, broadcast.");
  reduce.attrs = {ops::IntAttr("dst", 0)};
  reduce.collective_infer = [](absl::Span<const TensorMeta> in, const Attrs& attrs,
                               int world) -> absl::StatusOr<std::vector<TensorMeta>> {
    RETURN_IF_ERROR(CheckRank("reduce", "dst", attrs, world));
    return std::vector<TensorMeta>{{in[0].dtype, in[0].shape}};
  };
  reduce.backward = [](const GradContext& c) -> absl::StatusOr<std::vector<Tensor>> {
    GradOps o(c.run);
    ASSIGN_OR_RETURN(
        Tensor g, o.Op(opname::broadcast, {c.grad_outputs[0]}, {{"src", c.attrs.GetInt("dst")}}));
    return std::vector<Tensor>{g};
  };
  MustAdd(r, std::move(reduce));

  OpDef barrier = ops::NewOp("barrier", "distributed", {}, DTypeSet(), Marking::kNonDifferentiable);
  barrier.min_inputs = barrier.max_inputs = 0;
  barrier.collective = CollectiveKind::kBarrier;
  barrier.collective_infer = [](absl::Span<const TensorMeta>, const Attrs&,
                                int) -> absl::StatusOr<std::vector<TensorMeta>> {
    return std::vector<TensorMeta>{};
  };
  barrier.doc = "Returns once every rank of the group has called it; no outputs.";
  MustAdd(r, std::move(barrier));
}

}  // namespace tensord
