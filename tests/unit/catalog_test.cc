// The op catalog is enforced here: every op of OPS.md (tiers 1 and 2) is registered with the
// marking the table gives, has a shape rule or composite, a backward rule when differentiable, and
// a CPU kernel; no op outside the catalog is exposed.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/op_test_util.h"
#include "tests/support/source_path.h"

namespace tensord {
namespace {

constexpr Marking d = Marking::kDifferentiable;
constexpr Marking z = Marking::kZeroGrad;
constexpr Marking n = Marking::kNonDifferentiable;

// OPS.md tier 1, op → marking ("grad" column).
const std::map<std::string, Marking>& Tier1() {
  static const auto* table = new std::map<std::string, Marking>{
      {"zeros", n},
      {"ones", n},
      {"full", n},
      {"zeros_like", n},
      {"ones_like", n},
      {"full_like", n},
      {"arange", n},
      {"rand", n},
      {"randn", n},
      {"randint", n},
      {"add", d},
      {"sub", d},
      {"mul", d},
      {"div", d},
      {"pow", d},
      {"maximum", d},
      {"minimum", d},
      {"eq", n},
      {"ne", n},
      {"lt", n},
      {"le", n},
      {"gt", n},
      {"ge", n},
      {"logical_and", n},
      {"logical_or", n},
      {"logical_xor", n},
      {"where", d},
      {"neg", d},
      {"abs", d},
      {"exp", d},
      {"log", d},
      {"sqrt", d},
      {"rsqrt", d},
      {"square", d},
      {"reciprocal", d},
      {"sign", z},
      {"floor", z},
      {"ceil", z},
      {"round", z},
      {"trunc", z},
      {"frac", d},
      {"clamp", d},
      {"logical_not", n},
      {"isnan", n},
      {"isinf", n},
      {"isfinite", n},
      {"relu", d},
      {"sigmoid", d},
      {"tanh", d},
      {"gelu", d},
      {"silu", d},
      {"softplus", d},
      {"leaky_relu", d},
      {"elu", d},
      {"softmax", d},
      {"log_softmax", d},
      {"sum", d},
      {"mean", d},
      {"max", d},
      {"min", d},
      {"amax", d},
      {"amin", d},
      {"argmax", n},
      {"argmin", n},
      {"var", d},
      {"std", d},
      {"logsumexp", d},
      {"all", n},
      {"any", n},
      {"reshape", d},
      {"flatten", d},
      {"squeeze", d},
      {"unsqueeze", d},
      {"permute", d},
      {"transpose", d},
      {"expand", d},
      {"contiguous", d},
      {"clone", d},
      {"cat", d},
      {"stack", d},
      {"split", d},
      {"chunk", d},
      {"narrow", d},
      {"slice", d},
      {"index_select", d},
      {"gather", d},
      {"masked_fill", d},
      {"one_hot", n},
      {"to_dtype", d},
      {"detach", n},
      {"to_device", d},
      {"assign", n},
      {"matmul", d},
      {"mm", d},
      {"bmm", d},
      {"linear", d},
      {"conv2d", d},
      {"max_pool2d", d},
      {"avg_pool2d", d},
      {"layer_norm", d},
      {"embedding", d},
      {"dropout", d},
      {"mse_loss", d},
      {"l1_loss", d},
      {"cross_entropy", d},
      {"nll_loss", d},
      {"binary_cross_entropy", d},
      {"binary_cross_entropy_with_logits", d},
  };
  return *table;
}

// OPS.md tier 2, op → marking. Kept here as well as read from OPS.md so that a checkout without
// OPS.md beside it still fails when a tier-2 op goes missing or changes marking.
const std::map<std::string, Marking>& Tier2() {
  static const auto* table = new std::map<std::string, Marking>{
      {"eye", n},
      {"remainder", d},
      {"fmod", d},
      {"atan2", d},
      {"hypot", d},
      {"bitwise_and", n},
      {"bitwise_or", n},
      {"bitwise_xor", n},
      {"bitwise_not", n},
      {"log1p", d},
      {"expm1", d},
      {"log2", d},
      {"log10", d},
      {"exp2", d},
      {"sin", d},
      {"cos", d},
      {"tan", d},
      {"asin", d},
      {"acos", d},
      {"atan", d},
      {"sinh", d},
      {"cosh", d},
      {"asinh", d},
      {"acosh", d},
      {"atanh", d},
      {"erf", d},
      {"erfc", d},
      {"erfinv", d},
      {"lerp", d},
      {"relu6", d},
      {"selu", d},
      {"celu", d},
      {"mish", d},
      {"softsign", d},
      {"hardsigmoid", d},
      {"hardswish", d},
      {"hardtanh", d},
      {"logsigmoid", d},
      {"tanhshrink", d},
      {"softshrink", d},
      {"hardshrink", d},
      {"threshold", d},
      {"prelu", d},
      {"glu", d},
      {"softmin", d},
      {"prod", d},
      {"norm", d},
      {"cumsum", d},
      {"cumprod", d},
      {"scatter", d},
      {"scatter_add", d},
      {"index_add", d},
      {"masked_select", d},
      {"nonzero", n},
      {"flip", d},
      {"roll", d},
      {"repeat", d},
      {"tile", d},
      {"pad", d},
      {"tril", d},
      {"triu", d},
      {"sort", d},
      {"argsort", n},
      {"topk", d},
      {"dot", d},
      {"outer", d},
      {"addmm", d},
      {"baddbmm", d},
      {"einsum", d},
      {"trace", d},
      {"diag", d},
      {"diagonal", d},
      {"conv1d", d},
      {"conv3d", d},
      {"conv_transpose1d", d},
      {"conv_transpose2d", d},
      {"max_pool1d", d},
      {"avg_pool1d", d},
      {"adaptive_avg_pool2d", d},
      {"adaptive_max_pool2d", d},
      {"interpolate", d},
      {"batch_norm", d},
      {"group_norm", d},
      {"scaled_dot_product_attention", d},
      {"smooth_l1_loss", d},
      {"huber_loss", d},
      {"kl_div", d},
      {"cosine_similarity", d},
  };
  return *table;
}

// Op names of OPS.md rows of the given tier; empty when the file is not beside the checkout.
std::set<std::string> OpsMdNames(const std::string& tier) {
  std::ifstream in(testing::SourcePath("../shared/OPS.md"));
  std::set<std::string> names;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> cells = absl::StrSplit(line, '|');
    if (cells.size() < 6 || absl::StripAsciiWhitespace(cells[5]) != tier) continue;
    // "relu, gelu (approximate none/tanh), ..." → names without parenthesised notes.
    std::string ops = std::regex_replace(cells[1], std::regex("\\([^)]*\\)"), "");
    for (absl::string_view name : absl::StrSplit(ops, ',')) {
      name = absl::StripAsciiWhitespace(name);
      if (!name.empty()) names.insert(std::string(name));
    }
  }
  return names;
}

TEST(Catalog, EveryTier1OpIsRegisteredWithItsMarking) {
  const OpRegistry& r = OpRegistry::Builtin();
  for (const auto& [name, marking] : Tier1()) {
    auto def = r.Find(name);
    ASSERT_TRUE(def.ok()) << "tier-1 op missing: " << name;
    EXPECT_EQ(MarkingName((*def)->marking), std::string(MarkingName(marking))) << name;
  }
}

TEST(Catalog, EveryTier2OpIsRegisteredWithItsMarking) {
  const OpRegistry& r = OpRegistry::Builtin();
  for (const auto& [name, marking] : Tier2()) {
    auto def = r.Find(name);
    ASSERT_TRUE(def.ok()) << "tier-2 op missing: " << name;
    EXPECT_EQ((*def)->tier, 2) << name;
    EXPECT_EQ(MarkingName((*def)->marking), std::string(MarkingName(marking))) << name;
  }
}

TEST(Catalog, EmbeddedTablesMatchOpsMd) {
  std::set<std::string> tier1 = OpsMdNames("1");
  if (tier1.empty()) GTEST_SKIP() << "OPS.md is not beside this checkout";
  for (const auto& [tier, table] : {std::pair{"1", &Tier1()}, std::pair{"2", &Tier2()}}) {
    std::set<std::string> embedded;
    for (const auto& [name, m] : *table) embedded.insert(name);
    EXPECT_EQ(OpsMdNames(tier), embedded) << "tier " << tier;
  }
}

TEST(Catalog, EveryRegisteredOpIsComplete) {
  const Dispatcher& dispatcher = testing::TestDispatcher();
  for (const OpDef* def : OpRegistry::Builtin().All()) {
    SCOPED_TRACE(def->name);
    EXPECT_TRUE(def->infer || def->composite);
    if (def->marking == Marking::kDifferentiable) EXPECT_TRUE(def->backward || def->composite);
    if (def->internal) continue;
    EXPECT_NE(def->marking, Marking::kUnmarked) << "catalog ops are all marked";
    EXPECT_FALSE(def->category.empty());
    std::vector<std::string> backends = dispatcher.BackendsFor(*def);
    EXPECT_NE(std::find(backends.begin(), backends.end(), "cpu"), backends.end())
        << "no CPU kernel";
  }
}

TEST(Catalog, NoOpOutsideTheCatalog) {
  std::set<std::string> known;
  for (const auto& [name, m] : Tier1()) known.insert(name);
  for (const auto& [name, m] : Tier2()) known.insert(name);
  for (const OpDef* def : OpRegistry::Builtin().All()) {
    if (def->internal) continue;
    EXPECT_TRUE(known.count(def->name)) << def->name << " is not in OPS.md";
  }
}

}  // namespace
}  // namespace tensord
