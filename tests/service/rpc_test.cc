// Every RPC of the service through the client library, against an in-process server.
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

class RpcTest : public ServiceTest {};

TEST_F(RpcTest, HealthIsServing) {
  ASSERT_OK_AND_ASSIGN(bool serving, client().Health());
  EXPECT_TRUE(serving);
}

TEST_F(RpcTest, ListDevicesHasCpu) {
  ASSERT_OK_AND_ASSIGN(std::vector<tc::DeviceInfo> devices, client().Devices());
  ASSERT_FALSE(devices.empty());
  EXPECT_EQ(devices[0].name, "cpu");
  EXPECT_EQ(devices[0].kind, "cpu");
  EXPECT_FALSE(devices[0].description.empty());
}

TEST_F(RpcTest, ListOpsDescribesEveryOp) {
  ASSERT_OK_AND_ASSIGN(std::vector<tc::OpInfo> ops, client().Ops());
  ASSERT_GT(ops.size(), 10u);
  std::map<std::string, const tc::OpInfo*> by_name;
  for (size_t i = 0; i < ops.size(); ++i) {
    const tc::OpInfo& op = ops[i];
    if (i > 0) EXPECT_LT(ops[i - 1].name(), op.name()) << "ListOps is sorted by name";
    EXPECT_FALSE(op.category().empty()) << op.name();
    EXPECT_FALSE(op.backends().empty()) << op.name();
    EXPECT_NE(op.marking(), v1::MARKING_UNSPECIFIED) << op.name();
    EXPECT_TRUE(op.max_inputs() == -1 || op.max_inputs() >= op.min_inputs()) << op.name();
    by_name[op.name()] = &op;
  }
  ASSERT_TRUE(by_name.count("add"));
  const tc::OpInfo& add = *by_name["add"];
  EXPECT_EQ(add.marking(), v1::MARKING_DIFFERENTIABLE);
  EXPECT_EQ(add.min_inputs(), 2);
  EXPECT_EQ(add.max_inputs(), 2);
  EXPECT_THAT(add.backends(), ::testing::Contains("cpu"));
  bool has_alpha = false;
  for (const v1::AttrInfo& a : add.attrs()) has_alpha |= a.name() == "alpha";
  EXPECT_TRUE(has_alpha);
  ASSERT_TRUE(by_name.count("assign"));
  EXPECT_EQ(by_name["assign"]->marking(), v1::MARKING_NON_DIFFERENTIABLE);
  if (by_name.count("argmax")) {
    EXPECT_EQ(by_name["argmax"]->marking(), v1::MARKING_NON_DIFFERENTIABLE);
  }
  if (by_name.count("floor")) EXPECT_EQ(by_name["floor"]->marking(), v1::MARKING_ZERO_GRAD);
}

TEST_F(RpcTest, CreateSessionHonorsOptions) {
  tc::SessionOptions options;
  options.ttl_seconds = 77;
  options.memory_quota_bytes = 123456;
  options.autodiff = false;
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession(options));
  EXPECT_EQ(s.id().size(), 32u);
  EXPECT_EQ(s.id().find_first_not_of("0123456789abcdef"), std::string::npos) << s.id();
  EXPECT_NE(s.id(), session().id());
  EXPECT_EQ(s.ttl_seconds(), 77u);
  EXPECT_EQ(s.memory_quota_bytes(), 123456u);
  EXPECT_EQ(s.device(), "cpu");
  EXPECT_FALSE(s.autodiff_enabled());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, s.Info());
  EXPECT_EQ(info.session_id, s.id());
  EXPECT_EQ(info.ttl_seconds, 77u);
  EXPECT_EQ(info.memory_quota_bytes, 123456u);
  EXPECT_EQ(info.memory_used_bytes, 0u);
  EXPECT_FALSE(info.autodiff_enabled);
  EXPECT_TRUE(info.tensors.empty());
  EXPECT_TRUE(session().autodiff_enabled());
}

TEST_F(RpcTest, SessionIdsAreDistinct) {
  std::set<std::string> ids;
  std::vector<tc::Session> sessions;
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession());
    ids.insert(s.id());
    sessions.push_back(std::move(s));
  }
  EXPECT_EQ(ids.size(), 20u);
}

// Each session's affinity key (x-tensord-session on its calls, docs/scaling.md): 128 random
// bits as 32 hex digits, drawn per session, kept by AttachSession when given.
TEST_F(RpcTest, SessionsCarryDistinctAffinityKeys) {
  std::set<std::string> keys;
  std::vector<tc::Session> sessions;
  for (int i = 0; i < 20; ++i) {
    ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession());
    EXPECT_EQ(s.affinity_key().size(), 32u);
    EXPECT_EQ(s.affinity_key().find_first_not_of("0123456789abcdef"), std::string::npos)
        << s.affinity_key();
    keys.insert(s.affinity_key());
    sessions.push_back(std::move(s));
  }
  EXPECT_EQ(keys.size(), 20u);
  ASSERT_OK_AND_ASSIGN(tc::Session attached,
                       client().AttachSession(sessions[0].id(), sessions[0].affinity_key()));
  EXPECT_EQ(attached.affinity_key(), sessions[0].affinity_key());
  ASSERT_OK_AND_ASSIGN(tc::Session plain, client().AttachSession(sessions[0].id()));
  EXPECT_EQ(plain.affinity_key(), "");
}

TEST_F(RpcTest, KeepAliveReturnsTtl) {
  ASSERT_OK_AND_ASSIGN(uint64_t ttl, session().KeepAlive());
  EXPECT_EQ(ttl, session().ttl_seconds());
  EXPECT_GT(ttl, 0u);
}

TEST_F(RpcTest, PutGetRoundTripEveryDtype) {
  std::vector<tc::HostTensor> values = {
      tc::HostTensor(std::vector<float>{1.5f, -2.0f, 3.25f, 0.0f, 7.0f, -0.5f}, {2, 3}),
      tc::HostTensor(std::vector<double>{1e-300, -2.5, 3.0}),
      tc::HostTensor(std::vector<int32_t>{1, -2, 2147483647, -2147483647 - 1}, {2, 2}),
      tc::HostTensor(std::vector<int64_t>{int64_t{1} << 40, -3}),
      tc::HostTensor(std::vector<bool>{true, false, true}),
      tc::HostTensor::Scalar(2.5f),
      tc::HostTensor::Zeros(tc::DType::kF32, {0, 3}),
  };
  for (const tc::HostTensor& value : values) {
    SCOPED_TRACE(tc::DTypeName(value.dtype()) + tc::ShapeString(value.shape()));
    ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(value));
    EXPECT_NE(t.handle(), 0u);
    EXPECT_EQ(t.dtype(), value.dtype());
    EXPECT_EQ(t.shape(), value.shape());
    EXPECT_EQ(t.nbytes(), value.nbytes());
    EXPECT_EQ(t.device(), "cpu");
    EXPECT_FALSE(t.requires_grad());
    ASSERT_OK_AND_ASSIGN(tc::HostTensor back, t.ToHost());
    EXPECT_EQ(back, value);
    // Small chunks reassemble to the same bytes.
    ASSERT_OK_AND_ASSIGN(tc::HostTensor chunked, session().Get(t, 5));
    EXPECT_EQ(chunked, value);
  }
}

TEST_F(RpcTest, PutInSmallChunks) {
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.25f;
  tc::PutOptions options;
  options.chunk_bytes = 3;  // chunks split elements
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(tc::HostTensor(v, {10, 100}), options));
  EXPECT_EQ(Floats(t), v);
}

TEST_F(RpcTest, InfoListsTensorsAndMemory) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, session().Put(tc::HostTensor(std::vector<float>(10, 1))));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, session().Put(tc::HostTensor(std::vector<int64_t>{1, 2})));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
  ASSERT_EQ(info.tensors.size(), 2u);
  EXPECT_EQ(info.tensors[0], a.info());
  EXPECT_EQ(info.tensors[1], b.info());
  EXPECT_EQ(info.memory_used_bytes, 40u + 16u);
  EXPECT_LT(info.tensors[0].handle, info.tensors[1].handle);
}

TEST_F(RpcTest, EagerOpsAndOperators) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, session().Put(tc::HostTensor(std::vector<float>{1, 2, 3})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, session().Put(tc::HostTensor(std::vector<float>{10, 20, 30})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor c, (a + b) * 2.0 - 1);
  EXPECT_THAT(Floats(c), ElementsAre(21, 43, 65));
  ASSERT_OK_AND_ASSIGN(tc::Tensor d, 1.0 - a / b);
  EXPECT_THAT(Floats(d), ElementsAre(0.9f, 0.9f, 0.9f));
  ASSERT_OK_AND_ASSIGN(tc::Tensor e, tc::Add(a, b, /*alpha=*/2.0));
  EXPECT_THAT(Floats(e), ElementsAre(21, 42, 63));
  ASSERT_OK_AND_ASSIGN(tc::Tensor s, tc::Sum(-a));
  EXPECT_EQ(s.shape(), tc::Shape{});
  ASSERT_OK_AND_ASSIGN(double item, s.Item());
  EXPECT_EQ(item, -6.0);
  // Scalars are weak: an int tensor times 0.5 is f32.
  ASSERT_OK_AND_ASSIGN(tc::Tensor i, session().Put(tc::HostTensor(std::vector<int32_t>{2, 4})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor half, i * 0.5);
  EXPECT_EQ(half.dtype(), tc::DType::kF32);
  EXPECT_THAT(Floats(half), ElementsAre(1, 2));
  // Matmul and reshape through the named functions.
  ASSERT_OK_AND_ASSIGN(tc::Tensor m, tc::Reshape(a, {3, 1}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor mm, tc::Matmul(m, tc::Reshape(b, {1, 3})));
  EXPECT_EQ(mm.shape(), (tc::Shape{3, 3}));
  EXPECT_THAT(Floats(mm), ElementsAre(10, 20, 30, 20, 40, 60, 30, 60, 90));
}

TEST_F(RpcTest, ErrorsPassThroughExpressions) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, session().Put(tc::HostTensor(std::vector<float>{1, 2, 3})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, session().Put(tc::HostTensor(std::vector<float>{1, 2})));
  // The first failing op's error comes out of the whole expression.
  tc::TensorOr r = tc::Relu(tc::Sum(a + b) * 2.0);
  EXPECT_TRUE(FailsWith(Status(r), absl::StatusCode::kInvalidArgument, v1::SHAPE_MISMATCH,
                        {{"op", "add"}, {"call_index", "0"}}));
}

TEST_F(RpcTest, SessionOpWithCreationOps) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor z,
                       session().Op1("full", {}, {{"shape", {2, 2}}, {"value", 3.5}}));
  EXPECT_THAT(Floats(z), ElementsAre(3.5, 3.5, 3.5, 3.5));
  ASSERT_OK_AND_ASSIGN(tc::Tensor r, session().Op1("randn", {}, {{"shape", {4, 5}}, {"seed", 3}}));
  EXPECT_EQ(r.shape(), (tc::Shape{4, 5}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor r2, session().Op1("randn", {}, {{"shape", {4, 5}}, {"seed", 3}}));
  EXPECT_EQ(Floats(r), Floats(r2)) << "a seed makes randn reproducible";
  ASSERT_OK_AND_ASSIGN(tc::Tensor l,
                       session().Op1("add", {tc::HostTensor(std::vector<double>{1, 2}), 0.5}));
  EXPECT_EQ(l.dtype(), tc::DType::kF64);
  EXPECT_EQ(Doubles(l), (std::vector<double>{1.5, 2.5}));
}

TEST_F(RpcTest, BatchWithCallOutputsAndFetch) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, session().Put(tc::HostTensor(std::vector<float>{1, -2, 3})));
  tc::Batch batch = session().NewBatch();
  tc::CallRef doubled = batch.Add("mul", {x, 2.0});
  tc::CallRef relu = batch.Add("relu", {doubled});
  tc::CallRef total = batch.Add("sum", {relu}, {}, {/*requires_grad=*/false, /*fetch=*/true});
  tc::CallRef lit = batch.Add("add", {tc::HostTensor(std::vector<float>{1, 1, 1}), relu});
  ASSERT_EQ(batch.size(), 4u);
  ASSERT_OK_AND_ASSIGN(tc::BatchResult result, batch.Run());
  ASSERT_EQ(result.size(), 4u);
  EXPECT_THAT(Floats(result.output(doubled)), ElementsAre(2, -4, 6));
  EXPECT_THAT(Floats(result.output(relu)), ElementsAre(2, 0, 6));
  EXPECT_THAT(Floats(result.output(lit)), ElementsAre(3, 1, 7));
  ASSERT_EQ(result.values(total.index()).size(), 1u);
  EXPECT_THAT(*result.value(total).ToVector<float>(), ElementsAre(8));
  EXPECT_TRUE(result.values(doubled.index()).empty()) << "only fetch calls return values";
  // A batch may run again; its outputs are new tensors.
  ASSERT_OK_AND_ASSIGN(tc::BatchResult again, batch.Run());
  EXPECT_NE(again.output(relu).handle(), result.output(relu).handle());
}

TEST_F(RpcTest, MultiOutputOps) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor x,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2, 3, 4, 5, 6})));
  ASSERT_OK_AND_ASSIGN(std::vector<tc::Tensor> parts,
                       session().Op("split", {x}, {{"split_size", 4}}));
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_THAT(Floats(parts[0]), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(Floats(parts[1]), ElementsAre(5, 6));
  // Op1 on a two-output op is the client's own error.
  absl::Status one = session().Op1("split", {x}, {{"split_size", 4}}).status();
  EXPECT_EQ(one.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tc::ReasonOf(one), v1::INVALID_REQUEST);
  ASSERT_TRUE(tc::ErrorInfoOf(one).has_value());
  EXPECT_EQ(tc::ErrorInfoOf(one)->domain(), "tensord.client");
}

TEST_F(RpcTest, ReleaseExplicitAndAtomic) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor a, session().Put(tc::HostTensor(std::vector<float>{1})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor b, session().Put(tc::HostTensor(std::vector<float>{2})));
  const uint64_t ha = a.handle();
  // An unknown handle fails the whole call and frees nothing.
  EXPECT_TRUE(FailsWith(Status(session().Release(std::vector<uint64_t>{ha, 987654})),
                        absl::StatusCode::kNotFound, v1::TENSOR_NOT_FOUND,
                        {{"tensor_id", "987654"}}));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
  EXPECT_EQ(info.tensors.size(), 2u);
  ASSERT_OK_AND_ASSIGN(uint32_t released, session().Release(std::vector<tc::Tensor>{a, b}));
  EXPECT_EQ(released, 2u);
  EXPECT_TRUE(FailsWith(Status(session().Get(ha)), absl::StatusCode::kNotFound,
                        v1::TENSOR_NOT_FOUND, {{"tensor_id", absl::StrCat(ha)}}));
  ASSERT_OK_AND_ASSIGN(info, session().Info());
  EXPECT_TRUE(info.tensors.empty());
  EXPECT_EQ(info.memory_used_bytes, 0u);
}

TEST_F(RpcTest, DroppedTensorsAreReleased) {
  {
    std::vector<tc::Tensor> many;
    for (int i = 0; i < 10; ++i) {
      ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(tc::HostTensor(std::vector<float>{1, 2})));
      many.push_back(t);
    }
    ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
    EXPECT_EQ(info.tensors.size(), 10u);
  }
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
  EXPECT_TRUE(info.tensors.empty());
  EXPECT_EQ(info.memory_used_bytes, 0u);
  // More than one release batch of dropped handles, without an explicit flush.
  for (int i = 0; i < 200; ++i) {
    ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(tc::HostTensor(std::vector<float>{1})));
  }
  ASSERT_OK_AND_ASSIGN(std::vector<tc::Tensor> outs, session().Op("zeros", {}, {{"shape", {1}}}));
  ASSERT_OK_AND_ASSIGN(info, session().Info());
  EXPECT_EQ(info.tensors.size(), 1u);
}

TEST_F(RpcTest, CloseSessionEndsIt) {
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, s.Put(tc::HostTensor(std::vector<float>{1, 2})));
  const std::string id = s.id();
  ASSERT_OK(s.Close());
  EXPECT_TRUE(FailsWith(Status(t.ToHost()), absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND,
                        {{"session_id", id}}));
  EXPECT_TRUE(FailsWith(Status(s.Info()), absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND));
  EXPECT_TRUE(FailsWith(Status(s.KeepAlive()), absl::StatusCode::kNotFound, v1::SESSION_NOT_FOUND));
  EXPECT_TRUE(FailsWith(Status(client().AttachSession(id)), absl::StatusCode::kNotFound,
                        v1::SESSION_NOT_FOUND));
  // The resource is named too.
  std::optional<google::rpc::ResourceInfo> resource = tc::ResourceInfoOf(s.Info().status());
  ASSERT_TRUE(resource.has_value());
  EXPECT_EQ(resource->resource_name(), id);
}

TEST_F(RpcTest, DestroyedSessionObjectClosesTheSession) {
  std::string id;
  {
    ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession());
    id = s.id();
  }
  EXPECT_TRUE(FailsWith(Status(client().AttachSession(id)), absl::StatusCode::kNotFound,
                        v1::SESSION_NOT_FOUND));
  {
    ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession());
    id = s.id();
    s.Detach();
  }
  ASSERT_OK_AND_ASSIGN(tc::Session attached, client().AttachSession(id));
  EXPECT_EQ(attached.id(), id);
  ASSERT_OK(attached.Close());
}

TEST_F(RpcTest, AttachedSessionSeesHandlesOfAnotherClient) {
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(tc::HostTensor(std::vector<int64_t>{5, 6})));
  ASSERT_OK_AND_ASSIGN(tc::Client other,
                       tc::Client::Connect(absl::StrCat("127.0.0.1:", server().port())));
  ASSERT_OK_AND_ASSIGN(tc::Session same, other.AttachSession(session().id()));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor v, same.Get(t.handle()));
  EXPECT_THAT(*v.ToVector<int64_t>(), ElementsAre(5, 6));
}

TEST_F(RpcTest, AutodiffContextLifecycleAndBackward) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  EXPECT_NE(ctx.id(), 0u);
  tc::PutOptions leaf;
  leaf.requires_grad = true;
  leaf.context = ctx.id();
  ASSERT_OK_AND_ASSIGN(tc::Tensor x,
                       session().Put(tc::HostTensor(std::vector<float>{1, -2, 3}), leaf));
  EXPECT_TRUE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_EQ(x.context_id(), ctx.id());
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Sum(x * x));
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
  ASSERT_NE(info.context(ctx.id()), nullptr);
  EXPECT_EQ(info.context(ctx.id())->state, "open");
  EXPECT_EQ(info.context(ctx.id())->checkpointing, "none");
  EXPECT_GT(info.context(ctx.id())->tape_nodes, 0u);
  ASSERT_OK_AND_ASSIGN(tc::Gradients grads, ctx.Backward({y}));
  ASSERT_EQ(grads.size(), 1u);
  ASSERT_TRUE(grads.contains(x));
  tc::Tensor gx = grads.grad(x);
  EXPECT_FALSE(gx.requires_grad());
  EXPECT_THAT(Floats(gx), ElementsAre(2, -4, 6));
  ASSERT_OK_AND_ASSIGN(info, session().Info());
  EXPECT_EQ(info.context(ctx.id())->tape_nodes, 0u) << "backward frees the consumed tape";
  ASSERT_OK(ctx.Close());
  ASSERT_OK_AND_ASSIGN(info, session().Info());
  EXPECT_EQ(info.context(ctx.id())->state, "closed");
  // The closed context's tensors stay readable.
  EXPECT_THAT(Floats(x), ElementsAre(1, -2, 3));
}

TEST_F(RpcTest, SeedsAndRetainGraph) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor x,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, x * 3.0);
  ASSERT_OK_AND_ASSIGN(tc::Tensor seed, session().Put(tc::HostTensor(std::vector<float>{1, 10})));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g1, ctx.Backward({y}, {seed}, /*retain_graph=*/true));
  EXPECT_THAT(Floats(g1.grad(x)), ElementsAre(3, 30));
  // Not accumulated across calls.
  ASSERT_OK_AND_ASSIGN(tc::Gradients g2, ctx.Backward({y}, {seed}));
  EXPECT_THAT(Floats(g2.grad(x)), ElementsAre(3, 30));
}

TEST_F(RpcTest, RequiresGradCallsMakeLeaves) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  tc::OpOptions leaf;
  leaf.requires_grad = true;
  leaf.context = ctx.id();
  ASSERT_OK_AND_ASSIGN(tc::Tensor w, session().Op1("ones", {}, {{"shape", {2}}}, leaf));
  EXPECT_TRUE(w.is_leaf());
  EXPECT_EQ(w.context_id(), ctx.id());
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, tc::Sum(w * 5.0));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx.Backward({y}));
  EXPECT_THAT(Floats(g.grad(w)), ElementsAre(5, 5));
}

TEST_F(RpcTest, NoGradComputesPlainTensors) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor x,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2}), {true, ctx.id()}));
  {
    tc::NoGradGuard guard = session().NoGrad();
    ASSERT_OK_AND_ASSIGN(tc::Tensor y, x * 2.0);
    EXPECT_FALSE(y.requires_grad());
    tc::Batch b = session().NewBatch();
    tc::CallRef c = b.Add("add", {x, 1.0});
    ASSERT_OK_AND_ASSIGN(tc::BatchResult r, b.Run());
    EXPECT_FALSE(r.output(c).requires_grad());
  }
  ASSERT_OK_AND_ASSIGN(tc::Tensor z, x * 2.0);
  EXPECT_TRUE(z.requires_grad());
  tc::Batch nb = session().NewBatch({/*no_grad=*/true});
  tc::CallRef c = nb.Add("mul", {x, 2.0});
  ASSERT_OK_AND_ASSIGN(tc::BatchResult r, nb.Run());
  EXPECT_FALSE(r.output(c).requires_grad());
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
  EXPECT_EQ(info.context(ctx.id())->tape_nodes, 1u) << "only z was recorded";
}

TEST_F(RpcTest, DetachLeavesTheTape) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor x,
                       session().Put(tc::HostTensor(std::vector<float>{4}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor d, tc::Detach(x));
  EXPECT_FALSE(d.requires_grad());
  EXPECT_THAT(Floats(d), ElementsAre(4));
}

}  // namespace
}  // namespace tensord::service_test
