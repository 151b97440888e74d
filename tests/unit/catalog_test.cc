// The op catalog is enforced here: every op of the table below is registered with the marking
// the table gives, has a shape rule or composite, a backward rule when differentiable, and a CPU
// kernel; no op outside the table is exposed.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/op_test_util.h"
#include "tests/support/source_path.h"

namespace tensord {
namespace {

constexpr Marking d = Marking::kDifferentiable;
constexpr Marking z = Marking::kZeroGrad;
constexpr Marking n = Marking::kNonDifferentiable;

// Every public op, op -> marking.
const std::map<std::string, Marking>& Catalog() {
  static const auto* table = new std::map<std::string, Marking>{
      // Creation.
      {"zeros", n},
      {"ones", n},
      {"full", n},
      {"zeros_like", n},
      {"ones_like", n},
      {"full_like", n},
      {"arange", n},
      {"eye", n},
      {"rand", n},
      {"randn", n},
      {"randint", n},
      // Elementwise arithmetic, comparison and logic.
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
      {"logical_not", n},
      {"where", d},
      // Binary elementwise functions.
      {"remainder", d},
      {"fmod", d},
      {"atan2", d},
      {"hypot", d},
      {"bitwise_and", n},
      {"bitwise_or", n},
      {"bitwise_xor", n},
      {"bitwise_not", n},
      {"lerp", d},
      // Unary elementwise.
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
      {"isnan", n},
      {"isinf", n},
      {"isfinite", n},
      // Unary transcendental.
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
      // Activations.
      {"relu", d},
      {"sigmoid", d},
      {"tanh", d},
      {"gelu", d},
      {"silu", d},
      {"softplus", d},
      {"leaky_relu", d},
      {"elu", d},
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
      {"softmax", d},
      {"log_softmax", d},
      {"softmin", d},
      // Reductions and scans.
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
      {"prod", d},
      {"norm", d},
      {"cumsum", d},
      {"cumprod", d},
      // Shape and views.
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
      {"flip", d},
      {"roll", d},
      {"repeat", d},
      {"tile", d},
      {"pad", d},
      {"tril", d},
      {"triu", d},
      // Indexing and sorting.
      {"index_select", d},
      {"gather", d},
      {"masked_fill", d},
      {"one_hot", n},
      {"scatter", d},
      {"scatter_add", d},
      {"index_add", d},
      {"masked_select", d},
      {"nonzero", n},
      {"sort", d},
      {"argsort", n},
      {"topk", d},
      // Dtype, device and state.
      {"to_dtype", d},
      {"detach", n},
      {"to_device", d},
      {"assign", n},
      // Linear algebra.
      {"matmul", d},
      {"mm", d},
      {"bmm", d},
      {"linear", d},
      {"dot", d},
      {"outer", d},
      {"addmm", d},
      {"baddbmm", d},
      {"einsum", d},
      {"trace", d},
      {"diag", d},
      {"diagonal", d},
      // Convolution and pooling.
      {"conv1d", d},
      {"conv2d", d},
      {"conv3d", d},
      {"conv_transpose1d", d},
      {"conv_transpose2d", d},
      {"max_pool1d", d},
      {"avg_pool1d", d},
      {"max_pool2d", d},
      {"avg_pool2d", d},
      {"adaptive_avg_pool2d", d},
      {"adaptive_max_pool2d", d},
      // Normalization, embedding, dropout, resampling and attention.
      {"layer_norm", d},
      {"batch_norm", d},
      {"group_norm", d},
      {"embedding", d},
      {"dropout", d},
      {"interpolate", d},
      {"scaled_dot_product_attention", d},
      // Losses.
      {"mse_loss", d},
      {"l1_loss", d},
      {"cross_entropy", d},
      {"nll_loss", d},
      {"binary_cross_entropy", d},
      {"binary_cross_entropy_with_logits", d},
      {"smooth_l1_loss", d},
      {"huber_loss", d},
      {"kl_div", d},
      {"cosine_similarity", d},
  };
  return *table;
}

TEST(Catalog, EveryCatalogOpIsRegisteredWithItsMarking) {
  const OpRegistry& r = OpRegistry::Builtin();
  for (const auto& [name, marking] : Catalog()) {
    auto def = r.Find(name);
    ASSERT_TRUE(def.ok()) << "op missing: " << name;
    EXPECT_EQ(MarkingName((*def)->marking), std::string(MarkingName(marking))) << name;
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
  for (const auto& [name, m] : Catalog()) known.insert(name);
  for (const OpDef* def : OpRegistry::Builtin().All()) {
    if (def->internal) continue;
    EXPECT_TRUE(known.count(def->name)) << def->name << " is not in the catalog table";
  }
}

// Backward rules and composites call other ops by name (run.Run("mul"), o.Op("exp")): a typo
// there would only fail in a user's backward pass, so every literal op name in the server's
// sources must be a registered op (internal ones included).
TEST(Catalog, EveryOpNamedInTheSourcesIsRegistered) {
  const std::regex call(R"re((?:\bRun1?|\bOp)\("([a-z][a-z0-9_]*)")re");
  std::set<std::string> named;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(testing::SourcePath("server"))) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cc" && ext != ".h") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string source = text.str();
    for (std::sregex_iterator m(source.begin(), source.end(), call), end; m != end; ++m) {
      named.insert((*m)[1].str());
    }
  }
  ASSERT_GT(named.size(), 50u) << "the scan found too few op names: is the pattern stale?";
  for (const std::string& op : named) {
    EXPECT_TRUE(OpRegistry::Builtin().Find(op).ok())
        << op << " is called by name but not registered";
  }
}

}  // namespace
}  // namespace tensord
