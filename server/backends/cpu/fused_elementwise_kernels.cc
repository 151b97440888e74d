// The CPU kernel of fused_elementwise (server/ops/elementwise_fusion.h): the expression evaluated
// tile by tile over its output, each step with the scalar function its own loop kernel applies
// (pointwise_functions.h), so that every value is the one the calls it replaces computed. It is
// planned only where each step's own call would have computed that same arithmetic here: on a
// loop kernel, or on oneDNN's binary add/sub/mul/div (IEEE operations: the same bits). oneDNN's
// activations on large tensors compute otherwise; a step that would have run one is refused, and
// the program compiler then leaves it out of the expression. A large output's tiles are shared
// among the intra-op threads (OpenMP, the runtime oneDNN's threads come from).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "absl/strings/match.h"
#include "server/backends/cpu/elementwise_dispatch.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/loops.h"
#include "server/backends/cpu/pointwise_functions.h"
#include "server/ops/elementwise_fusion.h"
#include "server/ops/registry.h"

namespace tensord::cpu {
namespace {

using fusion::Fn;
using fusion::Step;

constexpr int64_t kTile = 2048;  // elements per pass: the stack's buffers stay in L1/L2

// A value on the expression's stack for one tile: kTile elements, or one repeated.
template <typename T>
struct Value {
  const T* data = nullptr;
  bool scalar = false;
};

template <typename T, typename F>
Value<T> Map1(F f, Value<T> x, T* out, int64_t n) {
  if (x.scalar) {
    out[0] = f(x.data[0]);
    return {out, true};
  }
  if constexpr (std::is_same_v<T, float> && RunsF32<F>::value) {
    F::Run(x.data, out, n);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f(x.data[i]);
  }
  return {out, false};
}

template <typename T, typename F>
Value<T> Map2(F f, Value<T> x, Value<T> y, T* out, int64_t n) {
  const T* a = x.data;
  const T* b = y.data;
  if (x.scalar && y.scalar) {
    out[0] = f(a[0], b[0]);
    return {out, true};
  }
  if (x.scalar) {
    const T s = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(s, b[i]);
  } else if (y.scalar) {
    const T s = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], s);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  }
  return {out, false};
}

template <typename T>
Value<T> Apply1(const Step& s, Value<T> x, T* out, int64_t n) {
  namespace pw = pointwise;
  switch (s.fn) {
    case Fn::kNeg:
      return Map1(pw::Neg{}, x, out, n);
    case Fn::kAbs:
      return Map1(pw::Abs{}, x, out, n);
    case Fn::kSquare:
      return Map1(pw::Square{}, x, out, n);
    case Fn::kExp:
      return Map1(pw::Exp{}, x, out, n);
    case Fn::kLog:
      return Map1(pw::Log{}, x, out, n);
    case Fn::kSqrt:
      return Map1(pw::Sqrt{}, x, out, n);
    case Fn::kRsqrt:
      return Map1(pw::Rsqrt{}, x, out, n);
    case Fn::kReciprocal:
      return Map1(pw::Reciprocal{}, x, out, n);
    case Fn::kRelu:
      return Map1(pw::Relu{}, x, out, n);
    case Fn::kSigmoid:
      return Map1(pw::Sigmoid{}, x, out, n);
    case Fn::kTanh:
      return Map1(pw::Tanh{}, x, out, n);
    case Fn::kSilu:
      return Map1(pw::Silu{}, x, out, n);
    case Fn::kGelu:
      return Map1(pw::Gelu{}, x, out, n);
    case Fn::kGeluTanh:
      return Map1(pw::GeluTanh{}, x, out, n);
    case Fn::kLeakyRelu:
      return Map1(pw::LeakyRelu<T>{T(s.a)}, x, out, n);
    case Fn::kElu:
      return Map1(pw::Elu<T>{T(s.a)}, x, out, n);
    case Fn::kClamp:
      return Map1(pw::Clamp<T>{T(s.a), T(s.b)}, x, out, n);
    default:
      return {};  // ParseSteps gave every function its arity
  }
}

template <typename T>
Value<T> Apply2(const Step& s, Value<T> x, Value<T> y, T* out, int64_t n) {
  namespace pw = pointwise;
  switch (s.fn) {
    case Fn::kAdd:
    case Fn::kSub: {
      // As the add kernel: x + alpha * y, with sub's alpha negated.
      const double alpha = s.fn == Fn::kSub ? -s.a : s.a;
      if (alpha == 1.0) return Map2(pw::Add{}, x, y, out, n);
      if (alpha == -1.0) return Map2(pw::Sub{}, x, y, out, n);
      return Map2(pw::AddScaled<T>{T(alpha)}, x, y, out, n);
    }
    case Fn::kMul:
      return Map2(pw::Mul{}, x, y, out, n);
    case Fn::kDiv:
      return Map2(pw::Div{}, x, y, out, n);
    case Fn::kMaximum:
      return Map2(pw::Maximum{}, x, y, out, n);
    case Fn::kMinimum:
      return Map2(pw::Minimum{}, x, y, out, n);
    default:
      return {};
  }
}

// An input as the expression reads it: the output's shape (read in place), one element, or
// another shape broadcast to the output's (gathered per tile).
template <typename T>
struct Leaf {
  const T* data = nullptr;
  bool full = false, scalar = false;
  std::vector<int64_t> strides;  // per output dim, 0 where broadcast
};

// Copies the leaf's elements for output elements [start, start + n) into `out`, a run along
// the last dim at a time (a copy where the leaf has that dim, a fill where it is broadcast).
template <typename T>
void Gather(const Leaf<T>& leaf, const Shape& shape, int64_t start, int64_t n, T* out) {
  const int rank = static_cast<int>(shape.size());
  const int last = rank - 1;
  std::vector<int64_t> index(rank);
  int64_t offset = 0, rest = start;
  for (int d = last; d >= 0; --d) {
    index[d] = rest % shape[d];
    rest /= shape[d];
    offset += index[d] * leaf.strides[d];
  }
  const int64_t step = leaf.strides[last];
  for (int64_t done = 0; done < n;) {
    const int64_t run = std::min(n - done, shape[last] - index[last]);
    const T* src = leaf.data + offset;
    if (step == 0) {
      std::fill(out + done, out + done + run, src[0]);
    } else if (step == 1) {
      std::copy(src, src + run, out + done);
    } else {
      for (int64_t i = 0; i < run; ++i) out[done + i] = src[i * step];
    }
    done += run;
    offset += run * step;
    index[last] += run;
    // Past the end of the last dim: carry into the outer ones.
    for (int d = last; d > 0 && index[d] == shape[d]; --d) {
      offset += leaf.strides[d - 1] - shape[d] * leaf.strides[d];
      index[d] = 0;
      ++index[d - 1];
    }
  }
}

template <typename T>
void Evaluate(const std::vector<Step>& steps, KernelCall& c) {
  Tensor& out_tensor = c.outputs[0];
  const Shape& shape = out_tensor.shape();
  const int64_t total = out_tensor.numel();
  std::vector<Leaf<T>> leaves(c.inputs.size());
  for (size_t k = 0; k < c.inputs.size(); ++k) {
    const Tensor& in = c.inputs[k];
    leaves[k].data = in.data<T>();
    leaves[k].full = in.shape() == shape;
    leaves[k].scalar = in.numel() == 1;
    if (!leaves[k].full && !leaves[k].scalar) {
      leaves[k].strides = BroadcastStrides(in.shape(), shape);
    }
  }
  // A tile buffer per stack value, no longer than the output; one set per thread.
  const int64_t tile = std::min(kTile, std::max<int64_t>(total, 1));
  const size_t per_thread = static_cast<size_t>(fusion::StackDepth(steps) * tile);
  T* out = out_tensor.data<T>();
  auto run_tile = [&](int64_t start, T* buffers) {
    const int64_t n = std::min(kTile, total - start);
    Value<T> stack[fusion::kMaxStackDepth];
    int depth = 0;
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step& s = steps[i];
      const bool last = i + 1 == steps.size();
      if (s.input) {
        const Leaf<T>& leaf = leaves[s.index];
        T* buf = buffers + depth * tile;
        if (leaf.full) {
          stack[depth] = {leaf.data + start, false};
        } else if (leaf.scalar) {
          stack[depth] = {leaf.data, true};
        } else {
          Gather(leaf, shape, start, n, buf);
          stack[depth] = {buf, false};
        }
        ++depth;
        continue;
      }
      const int arity = fusion::Arity(s.fn);
      const int at = depth - arity;
      // The last step writes the output itself.
      T* target = last ? out + start : buffers + at * tile;
      stack[at] = arity == 1 ? Apply1<T>(s, stack[at], target, n)
                             : Apply2<T>(s, stack[at], stack[at + 1], target, n);
      depth = at + 1;
    }
    const Value<T> result = stack[0];
    if (result.scalar) {
      std::fill(out + start, out + start + n, result.data[0]);
    } else if (result.data != out + start) {
      std::copy(result.data, result.data + n, out + start);
    }
  };
  const int64_t tiles = (total + kTile - 1) / kTile;
  // From ParallelElements() (at least 32 tiles) the tiles are shared among the intra-op
  // threads: below it, starting the threads costs about what a second core saves.
  if (total < ParallelElements()) {
    std::vector<T> buffers(per_thread);
    for (int64_t t = 0; t < tiles; ++t) run_tile(t * kTile, buffers.data());
    return;
  }
  // Tiles are independent (each writes its own part of the output): the intra-op threads
  // (--threads, as oneDNN's) share them, with the same bits as one thread.
#pragma omp parallel
  {
    std::vector<T> buffers(per_thread);
#pragma omp for schedule(static)
    for (int64_t t = 0; t < tiles; ++t) run_tile(t * kTile, buffers.data());
  }
}

absl::Status RunFused(KernelCall& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<const std::vector<Step>> steps,
                   fusion::CachedSteps(c.attrs.GetString(fusion::kStepsAttr), c.inputs.size()));
  VisitDType<kF>(c.outputs[0].dtype(), [&](auto tag) { Evaluate<decltype(tag)>(*steps, c); });
  return absl::OkStatus();
}

// Whether each step's own call, with the shapes it has inside the expression, would have run
// on a kernel computing the same arithmetic as this one.
bool Accepts(const KernelTable& table, const KernelQuery& q) {
  absl::StatusOr<std::vector<Step>> steps =
      fusion::ParseSteps(q.attrs->GetString(fusion::kStepsAttr), q.inputs.size());
  if (!steps.ok()) return false;
  std::vector<TensorMeta> stack;
  for (const Step& s : *steps) {
    if (s.input) {
      stack.push_back(q.inputs[s.index]);
      continue;
    }
    const int arity = fusion::Arity(s.fn);
    const std::vector<TensorMeta> operands(stack.end() - arity, stack.end());
    stack.resize(stack.size() - arity);
    TensorMeta result = operands[0];
    result.wrapped_number = false;
    if (arity == 2) {
      absl::StatusOr<Shape> joined = BroadcastShapes(operands[0].shape, operands[1].shape);
      if (!joined.ok()) return false;
      result.shape = *std::move(joined);
    }
    absl::StatusOr<const OpDef*> def = OpRegistry::Builtin().Find(fusion::OpOf(s.fn));
    if (!def.ok()) return false;
    absl::StatusOr<Attrs> attrs = ValidateAttrs((*def)->name, (*def)->attrs, fusion::StepAttrs(s));
    if (!attrs.ok()) return false;
    std::vector<DType> dtypes;
    for (const TensorMeta& m : operands) dtypes.push_back(m.dtype);
    const Kernel* kernel = table.Plan({**def, dtypes, &*attrs, operands, {&result, 1}, q.device});
    if (kernel == nullptr) return false;
    const bool exact_binary =
        s.fn == Fn::kAdd || s.fn == Fn::kSub || s.fn == Fn::kMul || s.fn == Fn::kDiv;
    if (!absl::StartsWith(kernel->name, "loop_") &&
        !(exact_binary && kernel->name == absl::StrCat("onednn_", (*def)->name))) {
      return false;
    }
    stack.push_back(std::move(result));
  }
  return true;
}

}  // namespace

void RegisterFusedElementwiseKernels(KernelTable& t) {
  const KernelTable* table = &t;
  t.Add(fusion::kElementwiseOp,
        Kernel{"loop_fused_elementwise",
               [](absl::Span<const DType> d, const Attrs*) {
                 return std::all_of(d.begin(), d.end(),
                                    [&](DType x) { return x == d[0] && kFloat.Contains(x); });
               },
               RunFused, DTypeSet(), [table](const KernelQuery& q) { return Accepts(*table, q); }});
}

}  // namespace tensord::cpu
