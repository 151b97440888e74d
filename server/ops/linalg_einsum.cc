// einsum, lowered onto diagonal, permute, reshape, sum, mul and matmul (so it is
// differentiable through them). Every operand is first aligned to one global dim order
// (ellipsis dims, then the labels as they first appear) with size 1 where it lacks a dim; labels
// only one operand uses and the output drops are summed at once; operands are then contracted
// left to right, each pair as one batched matmul [batch, left, sum] @ [batch, sum, right], or
// as a broadcast multiply when nothing is summed. "ij,jk->ik" is therefore exactly one matmul.
#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "server/ops/linalg_products.h"
#include "server/ops/op_helpers.h"
#include "server/ops/op_names.h"

namespace tensord {
namespace {
using namespace ops;

constexpr int kLabels = 52;  // A-Z then a-z: ids in ASCII order

struct Term {
  std::vector<int> labels;
  bool ellipsis = false;
  size_t ellipsis_at = 0;  // index in `labels` where the ellipsis dims go
};

struct Equation {
  std::vector<Term> inputs;
  bool explicit_output = false;
  Term output;
};

absl::Status EquationError(const std::string& equation, const std::string& what) {
  return Error(Reason::kBadAttribute, absl::StrCat("einsum: equation '", equation, "' ", what),
               {{"op", "einsum"}, {"attribute", "equation"}, {"value", equation}});
}

int LabelId(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + (c - 'a');
  return -1;
}

char LabelChar(int id) { return static_cast<char>(id < 26 ? 'A' + id : 'a' + (id - 26)); }

absl::StatusOr<Equation> Parse(const std::string& eq) {
  Equation e;
  Term term;
  auto where = [&] {
    return e.explicit_output ? std::string("the output")
                             : absl::StrCat("operand ", e.inputs.size());
  };
  for (size_t i = 0; i < eq.size(); ++i) {
    const char c = eq[i];
    if (c == ' ') continue;  // torch.einsum ignores spaces
    if (c == '.') {
      if (eq.compare(i, 3, "...") != 0) {
        return EquationError(eq, absl::StrCat("has a '.' at index ", i, " for ", where(),
                                              " that is not part of an ellipsis '...'"));
      }
      if (term.ellipsis) {
        return EquationError(eq, absl::StrCat("has a second ellipsis for ", where()));
      }
      term.ellipsis = true;
      term.ellipsis_at = term.labels.size();
      i += 2;
    } else if (c == ',') {
      if (e.explicit_output) {
        return EquationError(eq, absl::StrCat("has a ',' in the output at index ", i));
      }
      e.inputs.push_back(std::move(term));
      term = Term();
    } else if (c == '-') {
      if (e.explicit_output || i + 1 >= eq.size() || eq[i + 1] != '>') {
        return EquationError(eq, absl::StrCat("has a stray '-' at index ", i,
                                              " (one '->' may separate inputs and output)"));
      }
      e.inputs.push_back(std::move(term));
      term = Term();
      e.explicit_output = true;
      ++i;
    } else if (LabelId(c) >= 0) {
      term.labels.push_back(LabelId(c));
    } else {
      return EquationError(eq, absl::StrCat("has an invalid subscript '", std::string(1, c),
                                            "' at index ", i, " (subscripts are a-z, A-Z)"));
    }
  }
  (e.explicit_output ? e.output : e.inputs.emplace_back()) = std::move(term);
  return e;
}

// The implicit output: the ellipsis, then labels used exactly once, in ASCII order.
Term ImplicitOutput(const Equation& e) {
  std::vector<int> count(kLabels, 0);
  bool ellipsis = false;
  for (const Term& t : e.inputs) {
    for (int l : t.labels) ++count[l];
    ellipsis |= t.ellipsis;
  }
  Term out;
  out.ellipsis = ellipsis;
  for (int l = 0; l < kLabels; ++l) {
    if (count[l] == 1) out.labels.push_back(l);
  }
  return out;
}

absl::Status Mismatch(const std::string& what) {
  return Error(Reason::kShapeMismatch, absl::StrCat("einsum: ", what), {{"op", "einsum"}});
}

// An operand aligned to the global dims: `has[g]` says whether the equation gives it dim g
// (its size may still be 1, broadcasting).
struct Aligned {
  Tensor t;
  std::vector<bool> has;
};

// Permutes `x` by `perm`; a reshape suffices when the dims larger than 1 keep their order.
absl::StatusOr<Tensor> Arrange(OpRunner& run, const Tensor& x, const std::vector<int64_t>& perm) {
  Shape shape;
  int64_t last = -1;
  bool ordered = true;
  for (int64_t d : perm) {
    shape.push_back(x.dim(d));
    if (x.dim(d) == 1) continue;
    ordered &= d > last;
    last = d;
  }
  if (ordered) return run.Run1(opname::reshape, {x}, {{"shape", shape}});
  return run.Run1(opname::permute, {x}, {{"dims", perm}});
}

absl::StatusOr<Tensor> SumDims(OpRunner& run, const Tensor& x, const std::vector<int64_t>& dims) {
  if (dims.empty()) return x;  // an empty list would mean every dim
  return run.Run1(opname::sum, {x}, {{"dim", dims}, {"keepdim", true}});
}

class Einsum {
 public:
  Einsum(OpRunner& run, std::string eq) : run_(run), eq_(std::move(eq)) {}

  absl::StatusOr<Tensor> Run(absl::Span<const Tensor> in) {
    ASSIGN_OR_RETURN(Equation e, Parse(eq_));
    if (e.inputs.size() != in.size()) {
      const std::string want = absl::StrCat(e.inputs.size());
      return Error(
          Reason::kWrongArity,
          absl::StrCat("einsum: equation '", eq_, "' names ", want, " operands, got ", in.size()),
          {{"op", "einsum"}, {"expected", want}, {"got", absl::StrCat(in.size())}});
    }
    if (!e.explicit_output) e.output = ImplicitOutput(e);
    RETURN_IF_ERROR(Layout(e, in));
    std::vector<Aligned> ops;
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].dtype() != in[0].dtype()) {
        return Error(
            Reason::kDtypeMismatch,
            absl::StrCat("einsum: operands must have one dtype, got ", DTypeName(in[0].dtype()),
                         " (operand 0) and ", DTypeName(in[i].dtype()), " (operand ", i, ")"),
            {{"op", "einsum"}, {"dtype", std::string(DTypeName(in[i].dtype()))}});
      }
      ASSIGN_OR_RETURN(Aligned a, Align(e.inputs[i], in[i], i));
      ops.push_back(std::move(a));
    }
    RETURN_IF_ERROR(CheckSizes(ops));
    // Dims only one operand has and the output drops are summed before any product.
    for (size_t i = 0; i < ops.size(); ++i) {
      std::vector<int64_t> dims;
      for (int g = 0; g < dims_; ++g) {
        if (ops[i].has[g] && !in_output_[g] && Users(ops, g, 0) == 1) dims.push_back(g);
      }
      ASSIGN_OR_RETURN(ops[i].t, SumDims(run_, ops[i].t, dims));
      for (int64_t g : dims) ops[i].has[g] = false;
    }
    Aligned acc = ops[0];
    for (size_t i = 1; i < ops.size(); ++i) {
      std::vector<bool> sum(dims_);
      for (int g = 0; g < dims_; ++g) {
        sum[g] = (acc.has[g] || ops[i].has[g]) && !in_output_[g] && Users(ops, g, i + 1) == 0;
      }
      ASSIGN_OR_RETURN(acc, Contract(acc, ops[i], sum));
    }
    // Output dims in the equation's order; every other dim has size 1 by now.
    std::vector<int64_t> perm = output_dims_;
    Shape shape;
    for (int64_t g : perm) shape.push_back(acc.t.dim(g));
    for (int g = 0; g < dims_; ++g) {
      if (!in_output_[g]) perm.push_back(g);
    }
    ASSIGN_OR_RETURN(Tensor out, Arrange(run_, acc.t, perm));
    return run_.Run1(opname::reshape, {out}, {{"shape", shape}});
  }

 private:
  // Global dims: `ellipsis_` broadcast ellipsis dims, then one per label used by an input.
  absl::Status Layout(const Equation& e, absl::Span<const Tensor> in) {
    label_dim_.assign(kLabels, -1);
    for (size_t i = 0; i < in.size(); ++i) {
      const Term& t = e.inputs[i];
      const int64_t named = static_cast<int64_t>(t.labels.size());
      if (t.ellipsis ? in[i].rank() < named : in[i].rank() != named) {
        return Mismatch(absl::StrCat("operand ", i, " of shape ", ShapeToString(in[i].shape()),
                                     " has ", in[i].rank(), " dims but its subscripts name ", named,
                                     t.ellipsis ? " besides the ellipsis" : "", " in equation '",
                                     eq_, "'"));
      }
      if (t.ellipsis) ellipsis_ = std::max(ellipsis_, in[i].rank() - named);
    }
    // Labels in order of first appearance: operands written in that order ("bhqd,bhkd") align
    // without a copy, where an alphabetical order would permute them.
    dims_ = static_cast<int>(ellipsis_);
    for (const Term& t : e.inputs) {
      for (int l : t.labels) {
        if (label_dim_[l] < 0) label_dim_[l] = dims_++;
      }
    }
    in_output_.assign(dims_, false);
    const Term& o = e.output;
    for (size_t k = 0; k <= o.labels.size(); ++k) {
      if (o.ellipsis && k == o.ellipsis_at) {
        for (int g = 0; g < ellipsis_; ++g) {
          in_output_[g] = true;
          output_dims_.push_back(g);
        }
      }
      if (k == o.labels.size()) break;
      const int l = o.labels[k];
      if (label_dim_[l] < 0) {
        return EquationError(eq_,
                             absl::StrCat("has output subscript '", std::string(1, LabelChar(l)),
                                          "' that no input uses"));
      }
      if (in_output_[label_dim_[l]]) {
        return EquationError(eq_, absl::StrCat("has output subscript '",
                                               std::string(1, LabelChar(l)), "' more than once"));
      }
      in_output_[label_dim_[l]] = true;
      output_dims_.push_back(label_dim_[l]);
    }
    return absl::OkStatus();
  }

  // Takes the diagonal of repeated labels, then permutes and reshapes to the global dims.
  absl::StatusOr<Aligned> Align(const Term& t, Tensor x, size_t index) {
    const int64_t covered = x.rank() - static_cast<int64_t>(t.labels.size());
    std::vector<int64_t> dim_of;  // global dim of each of x's dims
    for (size_t k = 0; k <= t.labels.size(); ++k) {
      if (t.ellipsis && k == t.ellipsis_at) {
        for (int64_t j = 0; j < covered; ++j) dim_of.push_back(ellipsis_ - covered + j);
      }
      if (k < t.labels.size()) dim_of.push_back(label_dim_[t.labels[k]]);
    }
    for (bool repeated = true; repeated;) {
      repeated = false;
      for (size_t p = 0; p < dim_of.size() && !repeated; ++p) {
        for (size_t q = p + 1; q < dim_of.size() && !repeated; ++q) {
          if (dim_of[p] != dim_of[q]) continue;
          repeated = true;
          if (x.dim(p) != x.dim(q)) {
            return Mismatch(
                absl::StrCat("subscript '", std::string(1, LabelChar(LabelAt(dim_of[p]))),
                             "' is repeated for operand ", index, " but the sizes differ (",
                             x.dim(p), " vs ", x.dim(q), ") in shape ", ShapeToString(x.shape())));
          }
          ASSIGN_OR_RETURN(x, run_.Run1(opname::diagonal, {x},
                                        {{"offset", int64_t{0}},
                                         {"dim1", static_cast<int64_t>(p)},
                                         {"dim2", static_cast<int64_t>(q)}}));
          const int64_t g = dim_of[p];
          dim_of.erase(dim_of.begin() + q);
          dim_of.erase(dim_of.begin() + p);
          dim_of.push_back(g);
        }
      }
    }
    std::vector<int64_t> perm(dim_of.size());
    std::iota(perm.begin(), perm.end(), 0);
    std::sort(perm.begin(), perm.end(),
              [&](int64_t a, int64_t b) { return dim_of[a] < dim_of[b]; });
    Aligned a;
    a.has.assign(dims_, false);
    Shape shape(dims_, 1);
    for (size_t d = 0; d < dim_of.size(); ++d) {
      a.has[dim_of[d]] = true;
      shape[dim_of[d]] = x.dim(d);
    }
    ASSIGN_OR_RETURN(a.t, Arrange(run_, x, perm));
    ASSIGN_OR_RETURN(a.t, run_.Run1(opname::reshape, {a.t}, {{"shape", shape}}));
    return a;
  }

  int LabelAt(int64_t g) const {
    for (int l = 0; l < kLabels; ++l) {
      if (label_dim_[l] == g) return l;
    }
    return 0;
  }

  std::string DimName(int64_t g) const {
    return g < ellipsis_ ? absl::StrCat("ellipsis dim ", g)
                         : absl::StrCat("subscript '", std::string(1, LabelChar(LabelAt(g))), "'");
  }

  // Sizes of one dim must agree across operands up to broadcasting of 1s.
  absl::Status CheckSizes(const std::vector<Aligned>& ops) const {
    for (int g = 0; g < dims_; ++g) {
      int64_t seen = 1;
      for (size_t i = 0; i < ops.size(); ++i) {
        const int64_t s = ops[i].t.dim(g);
        if (s == 1) continue;
        if (seen != 1 && s != seen) {
          return Mismatch(absl::StrCat(DimName(g), " has size ", s, " for operand ", i,
                                       ", which does not broadcast with size ", seen,
                                       " of an earlier operand"));
        }
        seen = s;
      }
    }
    return absl::OkStatus();
  }

  static int Users(const std::vector<Aligned>& ops, int g, size_t from) {
    int n = 0;
    for (size_t i = from; i < ops.size(); ++i) n += ops[i].has[g];
    return n;
  }

  // a * b summed over the dims `sum` marks; the result is aligned like its operands.
  absl::StatusOr<Aligned> Contract(Aligned a, Aligned b, const std::vector<bool>& sum) {
    std::vector<int64_t> batch, left, right, inner, rest, sum_a, sum_b;
    for (int g = 0; g < dims_; ++g) {
      const int64_t sa = a.t.dim(g), sb = b.t.dim(g);
      if (sum[g]) {
        // A summed dim only one side really has is summed there alone.
        if (sa == sb && sa != 1) {
          inner.push_back(g);
        } else {
          if (sa != 1) sum_a.push_back(g);
          if (sb != 1) sum_b.push_back(g);
          rest.push_back(g);
        }
      } else if (sa == sb) {
        (sa == 1 ? rest : batch).push_back(g);
      } else {
        (sb == 1 ? left : right).push_back(g);
      }
    }
    ASSIGN_OR_RETURN(a.t, SumDims(run_, a.t, sum_a));
    ASSIGN_OR_RETURN(b.t, SumDims(run_, b.t, sum_b));
    Aligned out;
    out.has.resize(dims_);
    for (int g = 0; g < dims_; ++g) out.has[g] = !sum[g] && (a.has[g] || b.has[g]);
    if (inner.empty()) {
      ASSIGN_OR_RETURN(out.t, run_.Run1(opname::mul, {a.t, b.t}));
      return out;
    }
    auto size = [&](const Tensor& t, const std::vector<int64_t>& dims) {
      int64_t n = 1;
      for (int64_t g : dims) n *= t.dim(g);
      return n;
    };
    auto concat = [](std::initializer_list<const std::vector<int64_t>*> parts) {
      std::vector<int64_t> v;
      for (const auto* p : parts) v.insert(v.end(), p->begin(), p->end());
      return v;
    };
    const int64_t nb = size(a.t, batch), nl = size(a.t, left), nk = size(a.t, inner),
                  nr = size(b.t, right);
    // Size-1 dims of either side ride along at the end, where the reshape drops them.
    auto matrices = [&](int64_t rows, int64_t cols) {
      return batch.empty() ? Shape{rows, cols} : Shape{nb, rows, cols};
    };
    ASSIGN_OR_RETURN(Tensor x, Arrange(run_, a.t, concat({&batch, &left, &inner, &right, &rest})));
    ASSIGN_OR_RETURN(x, run_.Run1(opname::reshape, {x}, {{"shape", matrices(nl, nk)}}));
    ASSIGN_OR_RETURN(Tensor y, Arrange(run_, b.t, concat({&batch, &inner, &right, &left, &rest})));
    ASSIGN_OR_RETURN(y, run_.Run1(opname::reshape, {y}, {{"shape", matrices(nk, nr)}}));
    ASSIGN_OR_RETURN(Tensor p, run_.Run1(batch.empty() ? opname::mm : opname::bmm, {x, y}));
    // Back to the global order: [batch, left, right, inner and the rest as 1s], permuted.
    const std::vector<int64_t> order = concat({&batch, &left, &right, &inner, &rest});
    Shape shape;
    for (int64_t g : order) {
      const bool kept = std::find(inner.begin(), inner.end(), g) == inner.end() &&
                        std::find(rest.begin(), rest.end(), g) == rest.end();
      // Batch dims agree; a left (right) dim has size 1 on the other side.
      shape.push_back(!kept ? 1 : a.t.dim(g) == 1 ? b.t.dim(g) : a.t.dim(g));
    }
    ASSIGN_OR_RETURN(p, run_.Run1(opname::reshape, {p}, {{"shape", shape}}));
    std::vector<int64_t> inverse(dims_);
    for (size_t k = 0; k < order.size(); ++k) inverse[order[k]] = static_cast<int64_t>(k);
    ASSIGN_OR_RETURN(out.t, Arrange(run_, p, inverse));
    return out;
  }

  OpRunner& run_;
  std::string eq_;
  int64_t ellipsis_ = 0;
  int dims_ = 0;
  std::vector<int> label_dim_;  // global dim of each label, -1 if no input uses it
  std::vector<bool> in_output_;
  std::vector<int64_t> output_dims_;
};

}  // namespace

void RegisterLinalgEinsumOps(OpRegistry& r) {
  OpDef d = NewOp("einsum", "linalg", {"operands"}, kFloat, Marking::kDifferentiable);
  d.max_inputs = kVariadic;
  d.attrs = {{"equation", AttrType::kString, {}, true}};
  d.composite = ComputeLowPrecisionInF32([](OpRunner& run, absl::Span<const Tensor> in,
                                            const Attrs& a) -> absl::StatusOr<std::vector<Tensor>> {
    Einsum e(run, a.GetString("equation"));
    ASSIGN_OR_RETURN(Tensor out, e.Run(in));
    return std::vector<Tensor>{out};
  });
  d.doc =
      "torch.einsum: subscripts a-z A-Z, '...' broadcasts, repeated subscripts take "
      "diagonals, '->' names the output (implicit: '...' then the subscripts used once, in "
      "ASCII order); contractions run as batched matmuls, left to right";
  MustAdd(r, std::move(d));
}

}  // namespace tensord
