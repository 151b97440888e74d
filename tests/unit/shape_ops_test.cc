// Views (flatten, squeeze, unsqueeze, detach), layout copies (permute, transpose, contiguous,
// clone), to_device and assign, for every dtype, against references computed by index walks.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/shape_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using Ints = std::vector<int64_t>;

// A view must have the input's values in order and share its storage.
void ExpectView(const std::string& op, const Tensor& x, const AttrMap& attrs, const Shape& shape) {
  SCOPED_TRACE(op + " " + ShapeToString(x.shape()) + " " + std::string(DTypeName(x.dtype())));
  Tensor y = Run1(op, {x}, attrs);
  ASSERT_TRUE(y.defined());
  EXPECT_EQ(y.shape(), shape);
  EXPECT_EQ(y.dtype(), x.dtype());
  EXPECT_EQ(y.storage(), x.storage());
  EXPECT_TRUE(AllClose(y, x.ToDoubles(), 0, 0));
}

double CastReference(double v, DType to) {
  switch (to) {
    case DType::kF32:
      return static_cast<float>(v);
    case DType::kBool:
      return v != 0;
    case DType::kI32:
    case DType::kI64:
      return std::trunc(v);
    default:
      return v;
  }
}

TEST(ShapeOps, ReshapeEveryDtype) {
  for (DType d : kEveryDType) {
    Tensor x = Sample(d, {2, 3, 4}, 20);
    ExpectView("reshape", x, {{"shape", Ints{6, 4}}}, {6, 4});
    ExpectView("reshape", x, {{"shape", Ints{-1, 2}}}, {12, 2});
    ExpectView("reshape", x, {{"shape", Ints{24}}}, {24});
    ExpectView("reshape", Sample(d, {1}, 21), {{"shape", Ints{}}}, {});
    ExpectView("reshape", Sample(d, {0, 3}, 22), {{"shape", Ints{3, 0}}}, {3, 0});
  }
  Tensor x = Sample(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("reshape", {x}, {{"shape", Ints{4, 2}}})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("reshape", {x}, {{"shape", Ints{-1, -1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("reshape", {x}, {{"shape", Ints{-1, 4}}})), Reason::kShapeMismatch);
}

TEST(ShapeOps, ExpandEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {3, 1}, 23);
    Tensor y = Run1("expand", {x}, {{"size", Ints{2, 3, 4}}});
    EXPECT_TRUE(SameValues(y, {2, 3, 4}, Expected({2, 3, 4}, [&](const Shape& i) {
                             return At(x, {i[1], 0});
                           })));
    y = Run1("expand", {x}, {{"size", Ints{-1, 5}}});
    EXPECT_TRUE(SameValues(y, {3, 5}, Expected({3, 5}, [&](const Shape& i) {
                             return At(x, {i[0], 0});
                           })));
    Tensor s = Sample(d, {}, 24);
    EXPECT_TRUE(SameValues(Run1("expand", {s}, {{"size", Ints{2, 2}}}), {2, 2},
                           std::vector<double>(4, s.ToDoubles()[0])));
  }
  Tensor x = Sample(DType::kF32, {3, 2}, 1);
  EXPECT_EQ(ReasonOf(RunOp("expand", {x}, {{"size", Ints{3, 4}}})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("expand", {x}, {{"size", Ints{2}}})), Reason::kShapeMismatch);
  EXPECT_EQ(ReasonOf(RunOp("expand", {x}, {{"size", Ints{-1, 3, 2}}})), Reason::kBadAttribute);
}

TEST(ShapeOps, ToDtypeEveryPair) {
  for (DType from : kEveryDType) {
    for (DType to : kEveryDType) {
      Tensor x = Sample(from, {2, 3}, 25);
      Tensor y = Run1("to_dtype", {x}, {{"dtype", std::string(DTypeName(to))}});
      std::vector<double> want;
      for (double v : x.ToDoubles()) want.push_back(CastReference(v, to));
      EXPECT_EQ(y.dtype(), to);
      EXPECT_TRUE(SameValues(y, {2, 3}, want)) << DTypeName(from) << " -> " << DTypeName(to);
    }
  }
  EXPECT_EQ(ReasonOf(RunOp("to_dtype", {Sample(DType::kF32, {1}, 1)},
                           {{"dtype", std::string("complex")}})),
            Reason::kBadAttribute);
}

TEST(ShapeOps, FlattenEveryDtype) {
  for (DType d : kEveryDType) {
    Tensor x = Sample(d, {2, 3, 4, 5}, 1);
    ExpectView("flatten", x, {}, {120});
    ExpectView("flatten", x, {{"start_dim", int64_t{1}}}, {2, 60});
    ExpectView("flatten", x, {{"start_dim", int64_t{1}}, {"end_dim", int64_t{2}}}, {2, 12, 5});
    ExpectView("flatten", x, {{"start_dim", int64_t{-3}}, {"end_dim", int64_t{-2}}}, {2, 12, 5});
    ExpectView("flatten", x, {{"start_dim", int64_t{2}}, {"end_dim", int64_t{2}}}, {2, 3, 4, 5});
    ExpectView("flatten", Sample(d, {}, 2), {}, {1});
    ExpectView("flatten", Sample(d, {2, 0, 3}, 3), {}, {0});
    ExpectView("flatten", Sample(d, {2, 0, 3}, 3), {{"start_dim", int64_t{1}}}, {2, 0});
  }
}

TEST(ShapeOps, FlattenErrors) {
  Tensor x = Sample(DType::kF32, {2, 3, 4}, 1);
  EXPECT_EQ(ReasonOf(RunOp("flatten", {x}, {{"start_dim", int64_t{3}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("flatten", {x}, {{"end_dim", int64_t{-4}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("flatten", {x}, {{"start_dim", int64_t{2}}, {"end_dim", int64_t{1}}})),
            Reason::kBadAttribute);
}

TEST(ShapeOps, SqueezeEveryDtype) {
  for (DType d : kEveryDType) {
    Tensor x = Sample(d, {1, 3, 1, 2}, 4);
    ExpectView("squeeze", x, {}, {3, 2});
    ExpectView("squeeze", x, {{"dim", int64_t{0}}}, {3, 1, 2});
    ExpectView("squeeze", x, {{"dim", int64_t{-2}}}, {1, 3, 2});
    ExpectView("squeeze", x, {{"dim", int64_t{1}}}, {1, 3, 1, 2});  // size 3: left alone
    ExpectView("squeeze", x, {{"dim", Ints{0, 2}}}, {3, 2});
    ExpectView("squeeze", x, {{"dim", Ints{0, 1, -1}}}, {3, 1, 2});
    ExpectView("squeeze", Sample(d, {}, 5), {}, {});
    ExpectView("squeeze", Sample(d, {}, 5), {{"dim", int64_t{-1}}}, {});
    ExpectView("squeeze", Sample(d, {1, 0, 1}, 6), {}, {0});
  }
  Tensor x = Sample(DType::kF32, {1, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("squeeze", {x}, {{"dim", int64_t{2}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("squeeze", {x}, {{"dim", Ints{0, -2}}})), Reason::kBadAttribute);
}

TEST(ShapeOps, UnsqueezeEveryDtype) {
  for (DType d : kEveryDType) {
    Tensor x = Sample(d, {2, 3}, 7);
    ExpectView("unsqueeze", x, {{"dim", int64_t{0}}}, {1, 2, 3});
    ExpectView("unsqueeze", x, {{"dim", int64_t{2}}}, {2, 3, 1});
    ExpectView("unsqueeze", x, {{"dim", int64_t{-1}}}, {2, 3, 1});
    ExpectView("unsqueeze", x, {{"dim", int64_t{-3}}}, {1, 2, 3});
    ExpectView("unsqueeze", Sample(d, {}, 8), {{"dim", int64_t{0}}}, {1});
    ExpectView("unsqueeze", Sample(d, {0}, 8), {{"dim", int64_t{1}}}, {0, 1});
  }
  Tensor x = Sample(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("unsqueeze", {x}, {{"dim", int64_t{3}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("unsqueeze", {x}, {{"dim", int64_t{-4}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("unsqueeze", {x}, {})), Reason::kBadAttribute);  // dim is required
}

// out[i_0, ..., i_n] = x[j] with j[perm[k]] = i_k.
std::vector<double> PermuteReference(const Tensor& x, const Ints& perm, const Shape& out) {
  return Expected(out, [&](const Shape& i) {
    Shape j(i.size());
    for (size_t k = 0; k < perm.size(); ++k) j[perm[k]] = i[k];
    return At(x, j);
  });
}

TEST(ShapeOps, PermuteEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor x = Sample(d, {2, 3, 4, 5}, 9);
    for (const Ints& perm : {Ints{0, 1, 2, 3}, Ints{3, 2, 1, 0}, Ints{1, 3, 0, 2}, Ints{0, 2, 1, 3},
                             Ints{0, 1, 3, 2}}) {
      Shape out;
      for (int64_t p : perm) out.push_back(x.dim(p));
      Tensor y = Run1("permute", {x}, {{"dims", perm}});
      EXPECT_NE(y.storage(), x.storage());
      EXPECT_TRUE(SameValues(y, out, PermuteReference(x, perm, out)));
    }
    // Negative dims wrap.
    Tensor y = Run1("permute", {x}, {{"dims", Ints{-1, 0, -2, 1}}});
    EXPECT_TRUE(SameValues(y, {5, 2, 4, 3}, PermuteReference(x, {3, 0, 2, 1}, {5, 2, 4, 3})));
    EXPECT_TRUE(SameValues(Run1("permute", {Sample(d, {}, 1)}, {{"dims", Ints{}}}), {},
                           Sample(d, {}, 1).ToDoubles()));
    EXPECT_TRUE(
        SameValues(Run1("permute", {Sample(d, {0, 3}, 1)}, {{"dims", Ints{1, 0}}}), {3, 0}, {}));
  }
  Tensor x = Sample(DType::kF32, {2, 3, 4}, 1);
  EXPECT_EQ(ReasonOf(RunOp("permute", {x}, {{"dims", Ints{0, 1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("permute", {x}, {{"dims", Ints{0, 1, 1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("permute", {x}, {{"dims", Ints{0, 2, -1}}})), Reason::kBadAttribute);
  EXPECT_EQ(ReasonOf(RunOp("permute", {x}, {{"dims", Ints{0, 1, 3}}})), Reason::kBadAttribute);
}

TEST(ShapeOps, TransposeEveryDtype) {
  for (DType d : kEveryDType) {
    SCOPED_TRACE(DTypeName(d));
    Tensor m = Sample(d, {3, 5}, 10);
    EXPECT_TRUE(SameValues(Run1("transpose", {m}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}}),
                           {5, 3}, PermuteReference(m, {1, 0}, {5, 3})));
    Tensor x = Sample(d, {2, 3, 4}, 11);
    EXPECT_TRUE(SameValues(Run1("transpose", {x}, {{"dim0", int64_t{-1}}, {"dim1", int64_t{0}}}),
                           {4, 3, 2}, PermuteReference(x, {2, 1, 0}, {4, 3, 2})));
    EXPECT_TRUE(SameValues(Run1("transpose", {x}, {{"dim0", int64_t{1}}, {"dim1", int64_t{1}}}),
                           {2, 3, 4}, x.ToDoubles()));
    Tensor s = Sample(d, {}, 12);
    EXPECT_TRUE(SameValues(Run1("transpose", {s}, {{"dim0", int64_t{0}}, {"dim1", int64_t{-1}}}),
                           {}, s.ToDoubles()));
  }
  Tensor x = Sample(DType::kF32, {2, 3}, 1);
  EXPECT_EQ(ReasonOf(RunOp("transpose", {x}, {{"dim0", int64_t{0}}, {"dim1", int64_t{2}}})),
            Reason::kBadAttribute);
}

TEST(ShapeOps, ContiguousAndCloneCopy) {
  for (DType d : kEveryDType) {
    for (const char* op : {"contiguous", "clone"}) {
      for (const Shape& shape : {Shape{2, 3}, Shape{}, Shape{0, 4}}) {
        Tensor x = Sample(d, shape, 13);
        Tensor y = Run1(op, {x});
        EXPECT_NE(y.storage(), x.storage()) << op;
        EXPECT_TRUE(SameValues(y, shape, x.ToDoubles())) << op;
      }
    }
  }
}

TEST(ShapeOps, DetachSharesStorageWithoutAutodiff) {
  AutodiffContext ctx(7, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 7 ? &ctx : nullptr; };
  for (DType d : kEveryDType) {
    Tensor x = Sample(d, {2, 3}, 14);
    x.set_autograd(MakeLeafMeta(7, 1));
    auto out = TestDispatcher().Call("detach", {x}, {}, env);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)[0].storage(), x.storage());
    EXPECT_EQ((*out)[0].autograd(), nullptr);
    EXPECT_TRUE(SameValues((*out)[0], {2, 3}, x.ToDoubles()));
  }
  // detach is the way out of a closed context.
  Tensor x = Sample(DType::kF32, {2}, 15);
  x.set_autograd(MakeLeafMeta(7, 2));
  ctx.Close();
  EXPECT_TRUE(TestDispatcher().Call("detach", {x}, {}, env).ok());
  EXPECT_EQ(GetReason(TestDispatcher().Call("clone", {x}, {}, env).status()),
            Reason::kAutodiffContextNotEnabled);
}

TEST(ShapeOps, ToDevice) {
  for (DType d : kEveryDType) {
    Tensor x = Sample(d, {3, 2}, 16);
    Tensor y = Run1("to_device", {x}, {{"device", std::string("cpu")}});
    EXPECT_EQ(y.device(), "cpu");
    EXPECT_NE(y.storage(), x.storage());
    EXPECT_TRUE(SameValues(y, {3, 2}, x.ToDoubles()));
  }
  auto bad = RunOp("to_device", {Sample(DType::kF32, {2}, 1)}, {{"device", std::string("cuda:0")}});
  EXPECT_EQ(ReasonOf(bad), Reason::kDeviceNotFound);
  EXPECT_EQ(GetMetadata(bad.status())["device"], "cuda:0");
  EXPECT_EQ(ReasonOf(RunOp("to_device", {Sample(DType::kF32, {2}, 1)}, {})), Reason::kBadAttribute);
}

TEST(ShapeOps, AssignWritesInPlaceAndBumpsVersion) {
  for (DType target_dtype : kEveryDType) {
    for (DType value_dtype : kEveryDType) {
      SCOPED_TRACE(std::string(DTypeName(target_dtype)) + " <- " +
                   std::string(DTypeName(value_dtype)));
      Tensor target = Sample(target_dtype, {2, 3}, 17);
      Tensor value = Sample(value_dtype, {3}, 18);  // broadcast over the rows
      const uint64_t before = target.storage()->version();
      Tensor out = Run1("assign", {target, value});
      EXPECT_EQ(out.storage(), target.storage());
      EXPECT_EQ(target.storage()->version(), before + 1);
      // Expected: the value cast to the target dtype (C++ conversion rules), once per row.
      std::vector<double> want;
      for (int row = 0; row < 2; ++row) {
        for (double v : value.ToDoubles()) want.push_back(CastReference(v, target_dtype));
      }
      EXPECT_TRUE(SameValues(target, {2, 3}, want));
    }
  }
}

TEST(ShapeOps, AssignThroughViewsAndAliases) {
  Tensor base = Values(DType::kF32, {2, 2}, {1, 2, 3, 4});
  Tensor view = Run1("reshape", {base}, {{"shape", Ints{4}}});
  Run1("assign", {view, Values(DType::kF32, {4}, {5, 6, 7, 8})});
  EXPECT_TRUE(SameValues(base, {2, 2}, {5, 6, 7, 8}));
  EXPECT_EQ(base.storage()->version(), 1u);
  // value is the target's own storage: it is read before it is overwritten.
  Run1("assign", {base, Run1("reshape", {base}, {{"shape", Ints{2, 2}}})});
  EXPECT_TRUE(SameValues(base, {2, 2}, {5, 6, 7, 8}));
  // A 0-d value fills everything; an empty target is fine.
  Run1("assign", {base, Values(DType::kI64, {}, {9})});
  EXPECT_TRUE(SameValues(base, {2, 2}, {9, 9, 9, 9}));
  Tensor empty = Sample(DType::kF32, {0, 3}, 1);
  EXPECT_TRUE(RunOp("assign", {empty, Values(DType::kF32, {3}, {1, 2, 3})}).ok());
}

TEST(ShapeOps, AssignShapeMismatch) {
  Tensor target = Sample(DType::kF32, {2, 3}, 1);
  for (const Shape& s : {Shape{2}, Shape{3, 3}, Shape{1, 2, 3}, Shape{2, 1, 3}}) {
    EXPECT_EQ(ReasonOf(RunOp("assign", {target, Sample(DType::kF32, s, 2)})),
              Reason::kShapeMismatch)
        << ShapeToString(s);
  }
  EXPECT_EQ(target.storage()->version(), 0u);
}

TEST(ShapeOps, AssignMakesSavedTensorsStale) {
  AutodiffContext ctx(3, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 3 ? &ctx : nullptr; };
  Tensor w = Values(DType::kF64, {2}, {1, 2});
  Tensor x = Values(DType::kF64, {2}, {3, 4});
  w.set_autograd(MakeLeafMeta(3, 1));
  x.set_autograd(MakeLeafMeta(3, 2));
  auto y = TestDispatcher().Call("mul", {w, x}, {}, env);
  ASSERT_TRUE(y.ok()) << y.status();
  // While recording, assign into an autodiff tensor is refused (no_grad is the way).
  EXPECT_EQ(
      GetReason(
          TestDispatcher().Call("assign", {w, Values(DType::kF64, {2}, {0, 0})}, {}, env).status()),
      Reason::kOperationNotMarkedForAutodiff);
  CallEnv no_grad = env;
  no_grad.no_grad = true;
  ASSERT_TRUE(
      TestDispatcher().Call("assign", {w, Values(DType::kF64, {2}, {5, 6})}, {}, no_grad).ok());
  EXPECT_EQ(w.storage()->version(), 1u);
  Tensor seed = Values(DType::kF64, {2}, {1, 1});
  auto grads = TestDispatcher().Backward(ctx, {(*y)[0]}, {seed}, false, env);
  EXPECT_EQ(GetReason(grads.status()), Reason::kSavedTensorModified);
}

}  // namespace
}  // namespace tensord
