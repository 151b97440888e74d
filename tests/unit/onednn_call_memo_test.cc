// A planned call's memo (server/backends/cpu/onednn_call_memo.h): a call run again with its
// plan finds its primitives and keys by position, building no key and searching no cache; a
// path that turns elsewhere (another site, a primitive its site's check refuses) is looked up
// by key again and remembered from there; and a dispatcher call run with its CallPlan computes
// what the same call without one computes, with no cache lookup after its first run.
#include "server/backends/cpu/onednn_call_memo.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/backends/cpu/onednn_common.h"
#include "tests/support/op_test_util.h"
#include "tests/unit/onednn_test_util.h"

namespace tensord {
namespace {

using cpu::onednn::CachedPrimitive;
using cpu::onednn::CallMemo;
using cpu::onednn::GetCacheStats;
using cpu::onednn::GetPrimitive;
using cpu::onednn::MemoKey;
using cpu::onednn::MemoScope;
using testing::AllClose;
using testing::Random;
using Ints = std::vector<int64_t>;
constexpr DType kF32 = DType::kF32;

using testing::ReluPrimitive;

int64_t Lookups() { return GetCacheStats().hits + GetCacheStats().misses; }

// Two sites' lookups, as one kernel run makes them; counts the keys built.
struct Kernel {
  int keys = 0;
  std::shared_ptr<const CachedPrimitive> a, b;
  void Run(bool with_a = true) {
    if (with_a) {
      a = GetPrimitive(
          "memo_test_a", [&] { return ++keys, std::string("memo_test|a"); },
          [] { return ReluPrimitive(8); });
    }
    b = GetPrimitive(
        "memo_test_b", [&] { return ++keys, std::string("memo_test|b"); },
        [] { return ReluPrimitive(9); });
  }
};

TEST(CallMemo, ARunAgainFindsItsPrimitivesByPosition) {
  CallMemo memo;
  Kernel k;
  {
    MemoScope scope(&memo);
    k.Run();
  }
  EXPECT_EQ(k.keys, 2);
  EXPECT_EQ(memo.size(), 2u);
  const auto a = k.a, b = k.b;
  const int64_t lookups = Lookups();
  for (int run = 0; run < 3; ++run) {
    MemoScope scope(&memo);
    k.Run();
  }
  EXPECT_EQ(k.keys, 2) << "no key built again";
  EXPECT_EQ(Lookups(), lookups) << "no cache searched";
  EXPECT_EQ(k.a, a);
  EXPECT_EQ(k.b, b);
  // Outside a memo every lookup is keyed.
  k.Run();
  EXPECT_EQ(k.keys, 4);
  EXPECT_EQ(Lookups(), lookups + 2);
}

TEST(CallMemo, APathThatTurnsIsLookedUpAgainAndRemembered) {
  CallMemo memo;
  Kernel k;
  {
    MemoScope scope(&memo);
    k.Run();
  }
  const auto b = k.b;
  {
    // Site b where site a was: b is found by key, and the memo now holds b alone.
    MemoScope scope(&memo);
    k.Run(/*with_a=*/false);
  }
  EXPECT_EQ(k.keys, 3);
  EXPECT_EQ(k.b, b);
  EXPECT_EQ(memo.size(), 1u);
  {
    MemoScope scope(&memo);
    k.Run(/*with_a=*/false);
  }
  EXPECT_EQ(k.keys, 3);
  {
    MemoScope scope(&memo);
    k.Run();
  }
  EXPECT_EQ(k.keys, 5) << "a where b was: both looked up";
  EXPECT_EQ(memo.size(), 2u);
}

TEST(CallMemo, ASiteCheckRefusesAnotherPrimitiveOfTheSameSite) {
  CallMemo memo;
  int keys = 0;
  auto get = [&](int64_t n) {
    return GetPrimitive(
        "memo_test_sized", [&] { return ++keys, absl::StrCat("memo_test|sized", n); },
        [n] { return ReluPrimitive(n); },
        [n](const CachedPrimitive& p) { return p.pd.src_desc().dims()[0] == n; });
  };
  {
    MemoScope scope(&memo);
    EXPECT_EQ(get(5)->pd.src_desc().dims()[0], 5);
  }
  {
    MemoScope scope(&memo);
    EXPECT_EQ(get(6)->pd.src_desc().dims()[0], 6) << "not the 5's primitive";
  }
  EXPECT_EQ(keys, 2);
  {
    MemoScope scope(&memo);
    EXPECT_EQ(get(6)->pd.src_desc().dims()[0], 6);
  }
  EXPECT_EQ(keys, 2);
}

TEST(CallMemo, KeysAreBuiltOnceAndANestedCallWithoutAMemoKeysItsOwn) {
  CallMemo memo;
  int built = 0;
  auto key = [&] { return ++built, std::string("memo_test|workspace"); };
  {
    MemoScope scope(&memo);
    EXPECT_EQ(MemoKey("memo_test_key", key), "memo_test|workspace");
    {
      MemoScope inner(nullptr);  // a call without a plan, inside this one
      EXPECT_EQ(MemoKey("memo_test_key", key), "memo_test|workspace");
    }
    EXPECT_EQ(cpu::onednn::CurrentMemo(), &memo);
  }
  EXPECT_EQ(built, 2);
  EXPECT_EQ(memo.size(), 1u);
  {
    MemoScope scope(&memo);
    EXPECT_EQ(MemoKey("memo_test_key", key), "memo_test|workspace");
  }
  EXPECT_EQ(built, 2);
  EXPECT_EQ(cpu::onednn::CurrentMemo(), nullptr);
}

// Runs `op` three times with one plan: each result equals the unplanned call's, and only the
// first run searches the primitive cache.
void ExpectPlannedRunsFindTheirPrimitives(const std::string& op, std::vector<Tensor> inputs,
                                          const AttrMap& attrs) {
  SCOPED_TRACE(op);
  const Dispatcher& d = testing::TestDispatcher();
  absl::StatusOr<const OpDef*> def = d.registry().Find(op);
  ASSERT_TRUE(def.ok()) << def.status();
  auto call = [&](const std::vector<Tensor>& in, CallPlan* plan) {
    absl::StatusOr<std::vector<Tensor>> out = d.Call(**def, in, attrs, CallEnv{}, plan);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? *out : std::vector<Tensor>{};
  };
  const std::vector<Tensor> unplanned = call(inputs, nullptr);
  ASSERT_FALSE(unplanned.empty());
  CallPlan plan;
  int64_t lookups = Lookups();
  for (int run = 0; run < 3; ++run) {
    if (run == 1) {
      EXPECT_GT(Lookups(), lookups) << "the first run reaches oneDNN";
      lookups = Lookups();
    }
    const std::vector<Tensor> out = call(inputs, &plan);
    ASSERT_EQ(out.size(), unplanned.size());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_TRUE(AllClose(out[i], unplanned[i], 0, 0));
  }
  EXPECT_TRUE(plan.has_kernel);
  EXPECT_NE(plan.memo.state, nullptr);
  EXPECT_EQ(Lookups(), lookups) << "runs after the first search no cache";
  // Other input types: the plan is made again, and its memo with it.
  std::vector<Tensor> wider = inputs;
  Shape s = inputs[0].shape();
  s[0] += 1;
  wider[0] = Random(kF32, s, 9);
  const std::vector<Tensor> other = call(wider, &plan);
  const std::vector<Tensor> expected = call(wider, nullptr);
  ASSERT_FALSE(other.empty());
  ASSERT_FALSE(expected.empty());
  EXPECT_TRUE(AllClose(other[0], expected[0], 0, 0));
}

TEST(CallMemo, PlannedDispatcherCallsFindTheirPrimitivesInTheirMemo) {
  ExpectPlannedRunsFindTheirPrimitives("matmul",
                                       {Random(kF32, {17, 23}, 1), Random(kF32, {23, 19}, 2)}, {});
  // A convolution reorders its operands into oneDNN's blocked layouts and back.
  ExpectPlannedRunsFindTheirPrimitives(
      "conv2d", {Random(kF32, {2, 16, 12, 12}, 3), Random(kF32, {32, 16, 3, 3}, 4)},
      {{"padding", Ints{1, 1}}});
  ExpectPlannedRunsFindTheirPrimitives("max_pool2d", {Random(kF32, {2, 8, 12, 12}, 5)},
                                       {{"kernel_size", Ints{2, 2}}});
  ExpectPlannedRunsFindTheirPrimitives("layer_norm", {Random(kF32, {64, 300}, 6)},
                                       {{"normalized_shape", Ints{300}}});
}

}  // namespace
}  // namespace tensord
