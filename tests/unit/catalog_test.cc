// Completeness of the op table in the code (server/ops), the one source of truth: every op has
// the parts it needs to be served, and every op that rules call by name exists. An op added
// without one of them fails here with the op's name and what it lacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "tests/support/op_test_util.h"
#include "tests/support/source_path.h"

namespace tensord {
namespace {

// What every op needs before it is served; the op's own table entry (server/ops) gives its
// marking and rules, and its conformance row (tests/python/optable_*.py) checks its values,
// dtypes, marking and gradients against PyTorch and by finite differences.
std::vector<std::string> MissingParts(const OpDef& def, const Dispatcher& dispatcher) {
  std::vector<std::string> missing;
  if (!def.infer && !def.composite && !def.collective_infer)
    missing.push_back("a shape rule (infer) or composite");
  if (def.marking == Marking::kDifferentiable && !def.backward && !def.composite) {
    missing.push_back("a backward rule (it is marked differentiable)");
  }
  if (def.internal) return missing;
  if (def.marking == Marking::kUnmarked) {
    missing.push_back("a marking (differentiable, zero_grad or non_differentiable)");
  }
  if (def.category.empty()) missing.push_back("a category (docs/ops.md groups by it)");
  std::vector<std::string> backends = dispatcher.BackendsFor(def);  // composites: all
  if (std::find(backends.begin(), backends.end(), "cpu") == backends.end()) {
    missing.push_back("a CPU kernel (server/backends/cpu, KernelTable::Add)");
  }
  return missing;
}

TEST(Catalog, EveryRegisteredOpIsComplete) {
  const Dispatcher& dispatcher = testing::TestDispatcher();
  size_t public_ops = 0;
  for (const OpDef* def : OpRegistry::Builtin().All()) {
    if (!def->internal) ++public_ops;
    std::vector<std::string> missing = MissingParts(*def, dispatcher);
    EXPECT_TRUE(missing.empty()) << "op '" << def->name << "' lacks "
                                 << absl::StrJoin(missing, "; ");
  }
  EXPECT_GT(public_ops, 150u) << "the built-in registry lost its ops";
}

// Rules run other ops through the opname:: constants, which the registry checks at start-up;
// a string literal there would escape the check.
TEST(Catalog, RulesRunOpsThroughCheckedNames) {
  const std::regex literal(R"re((?:\bRun1?|\bOp|\bCall)\("([a-z][a-z0-9_]*)")re");
  const std::regex constant(R"re((?:\bRun1?|\bOp|\bCall)\(opname::)re");
  size_t checked = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(testing::SourcePath("server"))) {
    const std::string ext = entry.path().extension().string();
    if (ext != ".cc" && ext != ".h") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string source = text.str();
    for (std::sregex_iterator m(source.begin(), source.end(), literal), end; m != end; ++m) {
      ADD_FAILURE() << entry.path().filename() << " runs op \"" << (*m)[1].str()
                    << "\" by a string literal; use opname::" << (*m)[1].str()
                    << " (server/ops/op_names.h)";
    }
    checked += std::distance(std::sregex_iterator(source.begin(), source.end(), constant),
                             std::sregex_iterator());
  }
  EXPECT_GT(checked, 100u) << "the scan found too few rule calls: is the pattern stale?";
}

TEST(Catalog, EveryOpRunByNameIsRegistered) {
  EXPECT_TRUE(OpRegistry::Builtin().UnknownOpsRunByName().empty());
  // The check itself: a registry without them reports each one.
  OpRegistry empty;
  std::vector<std::string> unknown = empty.UnknownOpsRunByName();
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), "mul"), unknown.end());
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), "to_dtype"), unknown.end());
}

// Backends key their kernel tables by OpDef::id: the built-in ops are numbered 0..n-1, a copy
// keeps its number, and an op under another name (a renamed copy, a plugin's op) has none, so
// it never finds a built-in op's kernels.
TEST(Catalog, BuiltinOpsAreNumberedAndCopiesKeepTheirNumber) {
  const std::vector<const OpDef*> all = OpRegistry::Builtin().All();
  ASSERT_EQ(static_cast<int>(all.size()), OpRegistry::BuiltinCount());
  std::set<int> ids;
  for (const OpDef* def : all) {
    ids.insert(def->id);
    EXPECT_EQ(OpRegistry::BuiltinId(def->name), def->id) << def->name;
  }
  EXPECT_EQ(static_cast<int>(ids.size()), OpRegistry::BuiltinCount());
  EXPECT_EQ(*ids.begin(), 0);
  EXPECT_EQ(*ids.rbegin(), OpRegistry::BuiltinCount() - 1);
  EXPECT_EQ(OpRegistry::BuiltinId("no_such_op"), kNotBuiltin);

  OpRegistry copy;
  const OpDef& neg = **OpRegistry::Builtin().Find("neg");
  ASSERT_TRUE(copy.Add(neg).ok());
  EXPECT_EQ((*copy.Find("neg"))->id, neg.id);
  OpDef renamed = neg;
  renamed.name = "negated_elsewhere";
  ASSERT_TRUE(copy.Add(renamed).ok());
  EXPECT_EQ((*copy.Find("negated_elsewhere"))->id, kNotBuiltin);
}

}  // namespace
}  // namespace tensord
