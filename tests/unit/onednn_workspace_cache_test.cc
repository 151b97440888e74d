// The workspaces a oneDNN forward keeps for its backward (max pooling's argmax): found for the
// same input as it was, never for an input written since, a dead input or another primitive,
// and bounded; max pooling's gradient is right whether the kept workspace is used or not.
#include "server/backends/cpu/onednn_workspace_cache.h"

#include <gtest/gtest.h>

#include "tests/support/onednn_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord {
namespace {
using namespace testing;
using cpu::onednn::FindWorkspace;
using cpu::onednn::KeepWorkspace;
using cpu::onednn::PooledMemory;
using Ints = std::vector<int64_t>;

std::shared_ptr<const PooledMemory> Workspace(int64_t bytes) {
  const dnnl::memory::desc md({bytes}, dnnl::memory::data_type::u8, dnnl::memory::format_tag::a);
  return std::make_shared<const PooledMemory>(md);
}

TEST(WorkspaceCache, FoundForTheSameInputAsItWas) {
  Tensor x = Random(DType::kF32, {4, 4}, 1);
  auto ws = Workspace(64);
  KeepWorkspace("k|found", x, ws);
  EXPECT_EQ(FindWorkspace("k|found", x), ws);
  EXPECT_EQ(FindWorkspace("k|other", x), nullptr);  // another primitive's
  Tensor y = Random(DType::kF32, {4, 4}, 1);        // equal values, another tensor
  EXPECT_EQ(FindWorkspace("k|found", y), nullptr);
  Tensor view = x.Reshaped({16});  // the same bytes (the kernels' keys name the shape)
  EXPECT_EQ(FindWorkspace("k|found", view), ws);
}

TEST(WorkspaceCache, NotFoundOnceTheInputIsWritten) {
  Tensor x = Random(DType::kF32, {4}, 2);
  KeepWorkspace("k|written", x, Workspace(64));
  x.storage()->BumpVersion();
  EXPECT_EQ(FindWorkspace("k|written", x), nullptr);
}

TEST(WorkspaceCache, NotFoundForADeadInputAtTheSameAddress) {
  const void* address = nullptr;
  {
    Tensor x = Random(DType::kF32, {8}, 3);
    address = x.raw();
    KeepWorkspace("k|dead", x, Workspace(64));
  }
  // A new tensor may get the dead one's buffer; it must not get its workspace.
  for (int i = 0; i < 8; ++i) {
    Tensor y = Random(DType::kF32, {8}, 3);
    if (y.raw() == address) EXPECT_EQ(FindWorkspace("k|dead", y), nullptr);
  }
}

TEST(WorkspaceCache, BoundedInEntries) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < cpu::onednn::kMaxWorkspaces + 8; ++i) {
    inputs.push_back(Random(DType::kF32, {2}, static_cast<uint32_t>(i)));
    KeepWorkspace("k|bounded", inputs.back(), Workspace(16));
  }
  EXPECT_EQ(FindWorkspace("k|bounded", inputs.front()), nullptr);  // evicted, oldest first
  EXPECT_NE(FindWorkspace("k|bounded", inputs.back()), nullptr);
}

// The forward keeps its workspace and the backward uses it; an input written between the two
// makes the backward run the forward again: the loop kernel's gradient either way.
TEST(WorkspaceCache, MaxPoolGradientWithAndWithoutTheKeptWorkspace) {
  const AttrMap pool = {{"kernel_size", Ints{3}}, {"stride", Ints{2}}, {"padding", Ints{1}}};
  Tensor x = Random(DType::kF32, {2, 3, 9, 8}, 4);
  auto y = RunKernel("max_pool2d", false, {x}, pool);
  ASSERT_TRUE(y.ok()) << y.status();
  Tensor gy = Random(DType::kF32, (*y)[0].shape(), 5);
  EXPECT_TRUE(SameAsLoop("max_pool2d_backward", {gy, x}, pool, 1e-6));
  ASSERT_TRUE(RunOp("assign", {x, Random(DType::kF32, {2, 3, 9, 8}, 6)}).ok());
  EXPECT_TRUE(SameAsLoop("max_pool2d_backward", {gy, x}, pool, 1e-6));
}

}  // namespace
}  // namespace tensord
