#include "server/ops/layout_plan.h"

#include <algorithm>
#include <set>

#include "server/core/status.h"
#include "server/ops/linalg_products.h"
#include "server/ops/shape_ops.h"

namespace tensord::ops {
namespace {

// A [0] tensor that cat skips whatever the other inputs' rank (PyTorch's legacy rule).
bool LegacyEmpty(const Shape& s) { return s.size() == 1 && s[0] == 0; }

// The whole contiguous input `input` into a window of output `output`.
WindowCopy IntoWindow(size_t input, const Shape& shape, size_t output, int64_t offset,
                      std::vector<int64_t> strides) {
  return WindowCopy{input, output, shape, 0, ContiguousStrides(shape), offset, std::move(strides)};
}
// A window of input `input` into the whole contiguous output `output`.
WindowCopy FromWindow(size_t input, int64_t offset, std::vector<int64_t> strides, size_t output,
                      const Shape& shape) {
  return WindowCopy{input, output, shape, offset, std::move(strides), 0, ContiguousStrides(shape)};
}

absl::StatusOr<LayoutPlan> Cat(absl::Span<const Shape> in, const Shape& out, const Attrs& a) {
  LayoutPlan plan;
  const Shape* ref = nullptr;
  for (const Shape& s : in) {
    if (!LegacyEmpty(s)) {
      ref = &s;
      break;
    }
  }
  if (ref == nullptr) return plan;  // every input was a skipped [0] tensor
  ASSIGN_OR_RETURN(int64_t dim, WrapDim("cat", "dim", a.GetInt("dim"), ref->size()));
  const std::vector<int64_t> strides = ContiguousStrides(out);
  int64_t at = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    if (LegacyEmpty(in[i])) continue;
    plan.copies.push_back(IntoWindow(i, in[i], 0, at * strides[dim], strides));
    at += in[i][dim];
  }
  return plan;
}

// Input i is the slab [i] of `dim`: its shape with a 1 there has the output's strides.
absl::StatusOr<LayoutPlan> Stack(absl::Span<const Shape> in, const Shape& out, const Attrs& a) {
  ASSIGN_OR_RETURN(int64_t dim, WrapDim("stack", "dim", a.GetInt("dim"), out.size()));
  const std::vector<int64_t> strides = ContiguousStrides(out);
  std::vector<int64_t> dst_strides = strides;
  dst_strides.erase(dst_strides.begin() + dim);
  LayoutPlan plan;
  for (size_t i = 0; i < in.size(); ++i) {
    plan.copies.push_back(
        IntoWindow(i, in[i], 0, static_cast<int64_t>(i) * strides[dim], dst_strides));
  }
  return plan;
}

// split and chunk: the output shapes already say where each piece ends.
absl::StatusOr<LayoutPlan> Split(const std::string& op, const Shape& in,
                                 absl::Span<const Shape> out, const Attrs& a) {
  ASSIGN_OR_RETURN(int64_t dim, WrapDim(op, "dim", a.GetInt("dim"), in.size()));
  const std::vector<int64_t> strides = ContiguousStrides(in);
  LayoutPlan plan;
  int64_t at = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    plan.copies.push_back(FromWindow(0, at * strides[dim], strides, k, out[k]));
    at += out[k][dim];
  }
  return plan;
}

LayoutPlan Slice(const SliceSpec& s, const Shape& in, const Shape& out) {
  std::vector<int64_t> strides = ContiguousStrides(in);
  const int64_t offset = s.start * strides[s.dim];
  strides[s.dim] *= s.step;
  LayoutPlan plan;
  plan.copies.push_back(FromWindow(0, offset, std::move(strides), 0, out));
  return plan;
}

// Zeros with the gradient written back at start, start + step, ... along dim.
absl::StatusOr<LayoutPlan> SliceBackward(const Shape& grad, const Shape& out, const Attrs& a) {
  ASSIGN_OR_RETURN(int64_t dim, WrapDim("slice_backward", "dim", a.GetInt("dim"), grad.size()));
  std::vector<int64_t> strides = ContiguousStrides(out);
  const int64_t offset = a.GetInt("start") * strides[dim];
  strides[dim] *= a.GetInt("step");
  LayoutPlan plan;
  plan.zero_outputs = true;
  plan.copies.push_back(IntoWindow(0, grad, 0, offset, std::move(strides)));
  return plan;
}

// flip reads with negative strides from the last element of each flipped dim.
absl::StatusOr<LayoutPlan> Flip(const Shape& in, const Attrs& a) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, FlipDims(in, a));
  std::vector<int64_t> strides = ContiguousStrides(in);
  int64_t offset = 0;
  LayoutPlan plan;
  for (int64_t d : dims) {
    if (in[d] == 0) return plan;  // nothing to copy
    offset += (in[d] - 1) * strides[d];
    strides[d] = -strides[d];
  }
  plan.copies.push_back(FromWindow(0, offset, std::move(strides), 0, in));
  return plan;
}

// out[i] = in[(i - shift) mod n] per dim: along dim d, out[s, n) comes from in[0, n - s) and
// out[0, s) from in[n - s, n). Each combination of halves is one block copy.
absl::StatusOr<LayoutPlan> Roll(const Shape& in, const Attrs& a) {
  LayoutPlan plan;
  if (NumElements(in) == 0) return plan;
  ASSIGN_OR_RETURN(RollSpec spec, ResolveRoll(in, a));
  const std::vector<int64_t> strides = ContiguousStrides(spec.shape);
  std::vector<size_t> rolled;
  for (size_t d = 0; d < spec.shape.size(); ++d) {
    if (spec.shifts[d] != 0) rolled.push_back(d);
  }
  for (uint64_t halves = 0; halves < (uint64_t{1} << rolled.size()); ++halves) {
    WindowCopy c{0, 0, spec.shape, 0, strides, 0, strides};
    for (size_t i = 0; i < rolled.size(); ++i) {
      const size_t d = rolled[i];
      const int64_t n = spec.shape[d], s = spec.shifts[d];
      if (halves >> i & 1) {
        c.shape[d] = s;
        c.src_offset += (n - s) * strides[d];
      } else {
        c.shape[d] = n - s;
        c.dst_offset += s * strides[d];
      }
    }
    plan.copies.push_back(std::move(c));
  }
  return plan;
}

// The output viewed as [r0, s0, r1, s1, ...] (s: the input's shape with leading 1s) reads the
// input at stride 0 along every r dim.
absl::StatusOr<LayoutPlan> Repeat(const std::string& op, const Shape& x, const Shape& out,
                                  const Attrs& a) {
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, ResolveRepeats(op, x, a));
  const size_t rank = repeats.size();
  Shape in(rank - x.size(), 1);
  in.insert(in.end(), x.begin(), x.end());
  const std::vector<int64_t> in_strides = ContiguousStrides(in);
  const std::vector<int64_t> out_strides = ContiguousStrides(out);
  WindowCopy c;
  for (size_t d = 0; d < rank; ++d) {
    c.shape.insert(c.shape.end(), {repeats[d], in[d]});
    c.src_strides.insert(c.src_strides.end(), {0, in_strides[d]});
    c.dst_strides.insert(c.dst_strides.end(), {out_strides[d] * in[d], out_strides[d]});
  }
  LayoutPlan plan;
  plan.copies.push_back(std::move(c));
  return plan;
}

// The diagonal is a window of the contiguous input (diagonal_backward: of its output).
absl::StatusOr<LayoutPlan> Diagonal(const std::string& op, const Shape& in, const Shape& out,
                                    const Attrs& a) {
  const bool backward = op == "diagonal_backward";
  ASSIGN_OR_RETURN(DiagonalSpec s, ResolveDiagonal(op, backward ? out : in, a.GetInt("offset"),
                                                   a.GetInt("dim1"), a.GetInt("dim2")));
  LayoutPlan plan;
  plan.zero_outputs = backward;
  if (NumElements(backward ? in : out) == 0) return plan;
  plan.copies.push_back(backward ? IntoWindow(0, in, 0, s.window_offset, s.window_strides)
                                 : FromWindow(0, s.window_offset, s.window_strides, 0, out));
  return plan;
}

}  // namespace

bool IsLayoutOp(const std::string& op) {
  static const auto* ops = new std::set<std::string>{
      "cat",  "stack",  "split", "chunk",    "narrow",           "slice", "slice_backward", "flip",
      "roll", "repeat", "tile",  "diagonal", "diagonal_backward"};
  return ops->count(op) > 0;
}

absl::StatusOr<LayoutPlan> PlanLayout(const std::string& op, absl::Span<const Shape> inputs,
                                      absl::Span<const Shape> outputs, const Attrs& attrs) {
  if (op == "cat") return Cat(inputs, outputs[0], attrs);
  if (op == "stack") return Stack(inputs, outputs[0], attrs);
  if (op == "split" || op == "chunk") return Split(op, inputs[0], outputs, attrs);
  if (op == "slice") {
    ASSIGN_OR_RETURN(SliceSpec s, ResolveSlice(inputs[0], attrs));
    return Slice(s, inputs[0], outputs[0]);
  }
  if (op == "narrow") {
    ASSIGN_OR_RETURN(SliceSpec s, ResolveNarrow(inputs[0], attrs));
    return Slice(s, inputs[0], outputs[0]);
  }
  if (op == "slice_backward") return SliceBackward(inputs[0], outputs[0], attrs);
  if (op == "flip") return Flip(inputs[0], attrs);
  if (op == "roll") return Roll(inputs[0], attrs);
  if (op == "repeat" || op == "tile") return Repeat(op, inputs[0], outputs[0], attrs);
  return Diagonal(op, inputs[0], outputs[0], attrs);
}

std::vector<int64_t> PadSourceMap(const std::string& mode, int64_t n, int64_t before, int64_t after,
                                  int64_t out) {
  const int64_t lo = std::max<int64_t>(-before, 0), kept = n - lo - std::max<int64_t>(-after, 0);
  std::vector<int64_t> map(out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i = o - before;
    if (i < 0 || i >= n) {
      if (mode == "reflect") {
        i = i < 0 ? -i : 2 * (n - 1) - i;  // pads are smaller than n, so one bounce
      } else if (mode == "replicate") {
        i = std::clamp<int64_t>(i, 0, n - 1);
      } else if (mode == "circular") {
        i = lo + ((i - lo) % kept + kept) % kept;
      } else {
        i = -1;
      }
    } else if (mode == "circular") {
      i = lo + ((i - lo) % kept + kept) % kept;
    }
    map[o] = i;
  }
  return map;
}

}  // namespace tensord::ops
