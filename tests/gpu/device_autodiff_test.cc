// Tensors on an accelerator device in the dispatcher: moves in both directions and their
// gradients, mixing devices, the two autodiff failures with the device named, device memory
// charged to the session's account, and refusals before anything is allocated.
#include "server/core/device_block_cache.h"
#include "server/core/status.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/support/op_test_util.h"

namespace tensord::testing {
namespace {

const Dispatcher& D() { return DeviceDispatcher(); }

TEST(DeviceAutodiff, MovesAreDifferentiableBothWays) {
  TENSORD_REQUIRE_DEVICE(device);
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor x = Values(DType::kF64, {3}, {1, -2, 3});
  x.set_autograd(MakeLeafMeta(1, 7));
  auto on_device = D().Call("to_device", {x}, {{"device", device}}, env);
  ASSERT_TRUE(on_device.ok()) << on_device.status();
  EXPECT_EQ((*on_device)[0].device(), device);
  auto y = D().Call("mul", {(*on_device)[0], ScalarOperand(2.0)}, {}, env);
  ASSERT_TRUE(y.ok()) << y.status();
  auto back = D().Call("to_device", {(*y)[0]}, {{"device", std::string(kHostDevice)}}, env);
  ASSERT_TRUE(back.ok()) << back.status();
  auto loss = D().Call("sum", {(*back)[0]}, {}, env);
  ASSERT_TRUE(loss.ok()) << loss.status();
  EXPECT_TRUE(AllClose((*loss)[0], {4.0}));
  auto grads = D().Backward(ctx, {(*loss)[0]}, {Tensor()}, false, env);
  ASSERT_TRUE(grads.ok()) << grads.status();
  ASSERT_EQ(grads->size(), 1u);
  EXPECT_EQ((*grads)[0].grad.device(), kHostDevice);
  EXPECT_TRUE(AllClose((*grads)[0].grad, {2.0, 2.0, 2.0}));
}

TEST(DeviceAutodiff, MixingDevicesIsDeviceMismatchNamingBoth) {
  TENSORD_REQUIRE_DEVICE(device);
  CallEnv env;
  Tensor on_cpu = Values(DType::kF32, {3}, {1, 2, 3});
  Tensor on_device = MoveTo(on_cpu, device);
  auto r = D().Call("add", {on_cpu, on_device}, {}, env);
  EXPECT_EQ(GetReason(r.status()), Reason::kDeviceMismatch) << r.status();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  Metadata md = GetMetadata(r.status());
  EXPECT_EQ(md["device"], kHostDevice);
  EXPECT_EQ(md["other_device"], device);
  EXPECT_EQ(md["input_index"], "1");
  // A number operand, and a 0-d tensor in host memory, join a call on any device.
  auto with_number = D().Call("add", {on_device, ScalarOperand(1.0)}, {}, env);
  ASSERT_TRUE(with_number.ok()) << with_number.status();
  EXPECT_EQ((*with_number)[0].device(), device);
  EXPECT_TRUE(AllClose(MoveTo((*with_number)[0], kHostDevice), {2, 3, 4}));
  auto with_host_scalar = D().Call("mul", {Values(DType::kF32, {}, {3}), on_device}, {}, env);
  ASSERT_TRUE(with_host_scalar.ok()) << with_host_scalar.status();
  EXPECT_EQ((*with_host_scalar)[0].device(), device);
  // A 0-d tensor on the device does not join a CPU call: its bytes are not in host memory.
  Tensor device_scalar = MoveTo(Values(DType::kF32, {}, {3}), device);
  EXPECT_EQ(GetReason(D().Call("mul", {on_cpu, device_scalar}, {}, env).status()),
            Reason::kDeviceMismatch);
}

TEST(DeviceAutodiff, BothAutodiffFailuresNameTheDevice) {
  TENSORD_REQUIRE_DEVICE(device);
  AutodiffContext ctx(1, Checkpointing::kNone);
  CallEnv env;
  env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
  Tensor x = MoveTo(Values(DType::kF32, {2}, {1, 2}), device);
  x.set_autograd(MakeLeafMeta(1, 9));
  // assign writes in place: not marked for autodiff while recording.
  auto in_place = D().Call("assign", {x, ScalarOperand(0.0)}, {}, env);
  EXPECT_EQ(GetReason(in_place.status()), Reason::kOperationNotMarkedForAutodiff);
  EXPECT_EQ(GetMetadata(in_place.status())["device"], device);
  ctx.Close();
  auto closed = D().Call("exp", {x}, {}, env);
  EXPECT_EQ(GetReason(closed.status()), Reason::kAutodiffContextNotEnabled);
  EXPECT_EQ(GetMetadata(closed.status())["device"], device);
  EXPECT_EQ(GetMetadata(closed.status())["context_state"], "closed");
}

// An MLP step (linear, relu, linear, mse, backward, an sgd update) on the device: after its first
// run every tensor and temporary comes from the device's block cache, none from the driver.
TEST(DeviceAutodiff, TrainingStepAllocatesNothingAfterItsFirstRun) {
  TENSORD_REQUIRE_DEVICE(device);
  CallEnv env;
  env.device = device;
  Tensor x = MoveTo(Random(DType::kF32, {64, 32}, 1), device);
  Tensor target = MoveTo(Random(DType::kF32, {64, 8}, 2), device);
  Tensor w1 = MoveTo(Random(DType::kF32, {16, 32}, 3), device);
  Tensor w2 = MoveTo(Random(DType::kF32, {8, 16}, 4), device);
  auto step = [&]() -> absl::Status {
    AutodiffContext ctx(1, Checkpointing::kNone);
    env.contexts = [&](uint64_t id) { return id == 1 ? &ctx : nullptr; };
    Tensor p1 = w1, p2 = w2;
    p1.set_autograd(MakeLeafMeta(1, 11));
    p2.set_autograd(MakeLeafMeta(1, 12));
    ASSIGN_OR_RETURN(auto h, D().Call("linear", {x, p1}, {}, env));
    ASSIGN_OR_RETURN(auto r, D().Call("relu", {h[0]}, {}, env));
    ASSIGN_OR_RETURN(auto y, D().Call("linear", {r[0], p2}, {}, env));
    ASSIGN_OR_RETURN(auto loss, D().Call("mse_loss", {y[0], target}, {}, env));
    ASSIGN_OR_RETURN(auto grads, D().Backward(ctx, {loss[0]}, {Tensor()}, false, env));
    CallEnv update = env;
    update.no_grad = true;
    for (const LeafGradient& g : grads) {
      if (g.grad.shape() != w1.shape()) continue;
      RETURN_IF_ERROR(D().Call("sgd", {w1, g.grad}, {{"lr", 0.01}}, update).status());
    }
    return D().BackendFor(device).value()->Synchronize(device);
  };
  ASSERT_TRUE(step().ok());
  const DeviceBlockCache::Stats before = DeviceBlockCache::TotalStats();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(step().ok());
  const DeviceBlockCache::Stats after = DeviceBlockCache::TotalStats();
  EXPECT_EQ(after.allocations, before.allocations);
  EXPECT_GT(after.reuses, before.reuses);
}

// Number operands (0-d host tensors) reach an elementwise kernel as values: a call on one
// takes exactly the blocks of a copy (its output), with the CPU's results. (Storage dtypes
// are widened around the kernel, which takes blocks of its own.)
TEST(DeviceAutodiff, NumberOperandsTakeNoDeviceBlock) {
  TENSORD_REQUIRE_DEVICE(device);
  CallEnv env;
  env.device = device;
  auto requests = [] {
    const DeviceBlockCache::Stats s = DeviceBlockCache::TotalStats();
    return s.allocations + s.reuses;
  };
  for (DType dtype : {DType::kF32, DType::kI32, DType::kI64, DType::kBool}) {
    SCOPED_TRACE(DTypeName(dtype));
    Tensor host = CastTo(Random(DType::kF32, {3, 5}, 7, -5, 5), dtype);
    Tensor x = MoveTo(host, device);
    Tensor number = CastTo(Tensor::Scalar<float>(3.0f), dtype);
    ASSERT_TRUE(D().Call("clone", {x}, {}, env).ok());  // kernels built, cache warm
    ASSERT_TRUE(D().Call("maximum", {x, number}, {}, env).ok());
    const size_t before_neg = requests();
    ASSERT_TRUE(D().Call("clone", {x}, {}, env).ok());
    const size_t one_output = requests() - before_neg;
    const size_t before = requests();
    auto on_device = D().Call("maximum", {x, number}, {}, env);
    ASSERT_TRUE(on_device.ok()) << on_device.status();
    EXPECT_EQ(requests() - before, one_output);
    auto on_cpu = D().Call("maximum", {host, number}, {}, CallEnv{});
    ASSERT_TRUE(on_cpu.ok()) << on_cpu.status();
    EXPECT_EQ(MoveTo((*on_device)[0], kHostDevice).ToDoubles(), (*on_cpu)[0].ToDoubles());
  }
}

TEST(DeviceAutodiff, DeviceMemoryIsChargedAndRefusalsAllocateNothing) {
  TENSORD_REQUIRE_DEVICE(device);
  auto account = std::make_shared<MemoryAccount>(1024);
  CallEnv env;
  env.account = account;
  env.device = device;
  {
    auto z = D().Call("zeros", {},
                      {{"shape", std::vector<int64_t>{16}}, {"dtype", std::string("f32")}}, env);
    ASSERT_TRUE(z.ok()) << z.status();
    EXPECT_EQ((*z)[0].device(), device);
    EXPECT_EQ(account->used(), 64);
    // Over the quota: QUOTA_EXCEEDED, nothing kept.
    auto big = D().Call("ones", {}, {{"shape", std::vector<int64_t>{1024}}}, env);
    EXPECT_EQ(GetReason(big.status()), Reason::kQuotaExceeded);
    EXPECT_EQ(account->used(), 64);
    // An output whose size only the data gives is charged too: nonzero of 16 ones is
    // [16, 1] i64 (128 bytes), of 120 ones [120, 1] (960 bytes, over the quota beside them).
    auto few = D().Call("nonzero", {(*z)[0]}, {}, env);
    ASSERT_TRUE(few.ok()) << few.status();
    EXPECT_EQ((*few)[0].shape(), (Shape{0, 1}));
    auto ones = D().Call("ones", {}, {{"shape", std::vector<int64_t>{16}}}, env);
    ASSERT_TRUE(ones.ok()) << ones.status();
    auto some = D().Call("nonzero", {(*ones)[0]}, {}, env);
    ASSERT_TRUE(some.ok()) << some.status();
    EXPECT_EQ((*some)[0].device(), device);
    EXPECT_EQ(account->used(), 64 + 64 + 128);
    some->clear();
    ones->clear();
    auto many = D().Call("ones", {}, {{"shape", std::vector<int64_t>{120}}}, env);
    ASSERT_TRUE(many.ok()) << many.status();
    auto over = D().Call("nonzero", {(*many)[0]}, {}, env);
    EXPECT_EQ(GetReason(over.status()), Reason::kQuotaExceeded);
    EXPECT_EQ(account->used(), 64 + 480);
    many->clear();
    EXPECT_EQ(account->used(), 64);
  }
  EXPECT_EQ(account->used(), 0);
  // A creation op's device attribute overrides the call's device.
  env.device = kHostDevice;
  auto there = D().Call(
      "full", {}, {{"shape", std::vector<int64_t>{2}}, {"value", 5.0}, {"device", device}}, env);
  ASSERT_TRUE(there.ok()) << there.status();
  EXPECT_EQ((*there)[0].device(), device);
  EXPECT_TRUE(AllClose(MoveTo((*there)[0], kHostDevice), {5, 5}));
  auto nowhere = D().Call(
      "zeros", {}, {{"shape", std::vector<int64_t>{2}}, {"device", std::string("opencl:99")}}, env);
  EXPECT_EQ(GetReason(nowhere.status()), Reason::kDeviceNotFound);
}

}  // namespace
}  // namespace tensord::testing
