// The op catalog is enforced here: every op of OPS.md tier 1 is registered with the marking the
// table gives, has a shape rule or composite, a backward rule when differentiable, and a CPU
// kernel; no op outside the catalog is exposed.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/support/op_test_util.h"

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

// Op names of OPS.md rows of the given tier; empty when the file is not beside the checkout.
std::set<std::string> OpsMdNames(const std::string& tier) {
  std::ifstream in(std::string(TENSORD_SOURCE_DIR) + "/../shared/OPS.md");
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

TEST(Catalog, EmbeddedTableMatchesOpsMd) {
  std::set<std::string> tier1 = OpsMdNames("1");
  if (tier1.empty()) GTEST_SKIP() << "OPS.md is not beside this checkout";
  std::set<std::string> embedded;
  for (const auto& [name, m] : Tier1()) embedded.insert(name);
  EXPECT_EQ(tier1, embedded);
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
  std::set<std::string> tier2 = OpsMdNames("2");
  known.insert(tier2.begin(), tier2.end());
  for (const OpDef* def : OpRegistry::Builtin().All()) {
    if (def->internal) continue;
    if (def->tier == 2 && tier2.empty()) continue;  // OPS.md not available to check tier 2
    EXPECT_TRUE(known.count(def->name)) << def->name << " is not in OPS.md";
  }
}

}  // namespace
}  // namespace tensord
