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
  if (!def.infer && !def.composite) missing.push_back("a shape rule (infer) or composite");
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
