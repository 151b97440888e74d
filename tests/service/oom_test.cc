// Out of memory inside a kernel: a std::bad_alloc thrown by a CPU kernel becomes
// RESOURCE_EXHAUSTED OUT_OF_MEMORY at the backend's kernel boundary, a batch that hits it rolls
// back, and the process goes on serving.
#include <new>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/backends/cpu/kernel_table.h"
#include "server/core/status.h"
#include "server/ops/registry.h"
#include "server/service/execute.h"
#include "server/service/service_core.h"

namespace tensord {
namespace {

constexpr char kOp[] = "oom_test_exhausts_memory";

// The built-in catalog plus an op shaped like neg whose only kernel runs out of memory.
const OpRegistry& RegistryWithExhaustingOp() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    for (const OpDef* def : OpRegistry::Builtin().All()) EXPECT_TRUE(r->Add(*def).ok());
    OpDef def = **OpRegistry::Builtin().Find("neg");
    def.name = kOp;
    EXPECT_TRUE(r->Add(def).ok());
    cpu::Kernel kernel;
    kernel.name = "throws_bad_alloc";
    kernel.supports = [](absl::Span<const DType>, const Attrs*) { return true; };
    kernel.run = [](KernelCall&) -> absl::Status { throw std::bad_alloc(); };
    EXPECT_TRUE(cpu::KernelTable::AddExtension(kOp, "oom_test", kernel).ok());
    return r;
  }();
  return *registry;
}

TEST(OutOfMemory, BadAllocInAKernelRollsTheBatchBack) {
  Dispatcher dispatcher(RegistryWithExhaustingOp(), MakeBackends());
  Session session("s", SessionConfig{});
  absl::MutexLock lock(&session.mu());
  const std::vector<float> values = {1, 2, 3};
  absl::StatusOr<Tensor> x =
      dispatcher.FromHost(DType::kF32, {3}, "cpu", values.data(), 12, session.account());
  ASSERT_TRUE(x.ok()) << x.status();
  const uint64_t hx = session.Store(*x);
  const int64_t used = session.account()->used();

  BatchSpec batch;
  for (const char* op : {"neg", "assign", kOp, "neg"}) {
    CallSpec call;
    call.op = op;
    call.inputs.push_back({OperandSpec::Handle{hx}});
    if (call.op == "assign") call.inputs.push_back({OperandSpec::Scalar(7.0)});
    batch.calls.push_back(std::move(call));
  }
  absl::StatusOr<std::vector<CallOutcome>> r = ExecuteBatch(session, dispatcher, batch, nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_EQ(GetReason(r.status()), Reason::kOutOfMemory) << r.status();
  EXPECT_EQ(GetMetadata(r.status())["call_index"], "2");
  EXPECT_EQ(GetMetadata(r.status())["op"], kOp);
  EXPECT_EQ(session.tensors().size(), 1u);
  EXPECT_EQ(session.account()->used(), used);
  EXPECT_EQ(session.Get(hx)->ToDoubles(), (std::vector<double>{1, 2, 3})) << "assign undone";

  // The next batch runs as usual.
  BatchSpec next;
  CallSpec neg;
  neg.op = "neg";
  neg.inputs.push_back({OperandSpec::Handle{hx}});
  next.calls.push_back(std::move(neg));
  absl::StatusOr<std::vector<CallOutcome>> ok = ExecuteBatch(session, dispatcher, next, nullptr);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].outputs[0].tensor.ToDoubles(), (std::vector<double>{-1, -2, -3}));
}

}  // namespace
}  // namespace tensord
