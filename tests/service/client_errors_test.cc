// What the C++ client refuses itself is the status the server answers the same mistake with:
// the reason (ReasonOf), the code and the metadata keys, plus origin=client (docs/errors.md,
// "Errors the clients raise themselves").
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/status.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using ::testing::HasSubstr;

std::set<std::string> Keys(const absl::Status& status) {
  std::set<std::string> keys;
  for (const auto& [key, value] : tc::MetadataOf(status)) keys.insert(key);
  return keys;
}

// `status` is the client's own `reason` error with exactly `keys` (and origin) as metadata.
::testing::AssertionResult ClientRefusal(const absl::Status& status, v1::ErrorReason reason,
                                         std::set<std::string> keys) {
  const std::string got =
      absl::StrCat(absl::StatusCodeToString(status.code()), " ", tc::ReasonNameOf(status), " {",
                   absl::StrJoin(tc::MetadataOf(status), ", ", absl::PairFormatter("=")),
                   "}: ", status.message());
  if (tc::ReasonOf(status) != reason || status.code() != tc::CodeOf(reason)) {
    return ::testing::AssertionFailure()
           << "expected " << v1::ErrorReason_Name(reason) << " ("
           << absl::StatusCodeToString(tc::CodeOf(reason)) << "), got " << got;
  }
  if (tc::MetadataOf(status)[tc::kOriginKey] != "client") {
    return ::testing::AssertionFailure() << "not marked as the client's own: " << got;
  }
  keys.insert(tc::kOriginKey);
  if (Keys(status) != keys) {
    return ::testing::AssertionFailure()
           << "metadata keys {" << absl::StrJoin(keys, ", ") << "} expected, got " << got;
  }
  return ::testing::AssertionSuccess() << got;
}

// The server's answer to the same mistake: same reason, code and metadata keys (less its
// request_id, and those of `only_server`, which name a request position the client-side call
// has none of).
::testing::AssertionResult SameAsServer(const absl::Status& client_status,
                                        const absl::Status& server_status,
                                        const std::set<std::string>& only_server = {}) {
  std::optional<google::rpc::ErrorInfo> info = tc::ErrorInfoOf(server_status);
  if (!info || info->domain() != "tensord" || Keys(server_status).count(tc::kOriginKey)) {
    return ::testing::AssertionFailure() << "not a server error: " << server_status;
  }
  std::set<std::string> client_keys = Keys(client_status);
  client_keys.erase(tc::kOriginKey);
  std::set<std::string> server_keys = Keys(server_status);
  // Every server error names its call; the client's own errors had no call to name.
  if (server_keys.erase("request_id") == 0) {
    return ::testing::AssertionFailure()
           << "no request_id in the server's error: " << server_status;
  }
  for (const std::string& key : only_server) server_keys.erase(key);
  if (tc::ReasonOf(server_status) != tc::ReasonOf(client_status) ||
      server_status.code() != client_status.code() || server_keys != client_keys) {
    return ::testing::AssertionFailure()
           << "client: " << client_status << " {" << absl::StrJoin(client_keys, ", ")
           << "}\nserver: " << server_status << " {" << absl::StrJoin(server_keys, ", ") << "}";
  }
  return ::testing::AssertionSuccess();
}

const std::set<std::string> kOperandKeys = {"tensor_id", "call_index", "input_index", "op"};

class ClientErrorsTest : public ServiceTest {
 protected:
  tc::Tensor Put(std::vector<float> values) {
    absl::StatusOr<tc::Tensor> t = session().Put(tc::HostTensor(values));
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : tc::Tensor();
  }
  absl::Status RawBackward(const std::string& session_id, uint64_t context, uint64_t root) {
    grpc::ClientContext context_;
    v1::BackwardRequest request;
    request.set_session_id(session_id);
    request.set_context_id(context);
    request.add_roots(root);
    v1::BackwardResponse response;
    return tc::FromGrpcStatus(RawStub()->Backward(&context_, request, &response));
  }
};

TEST_F(ClientErrorsTest, CodesAreThoseOfTheServer) {
  for (const auto& [reason, code] : ReasonCodes()) {
    if (reason == Reason::kUnspecified) continue;
    EXPECT_EQ(tc::CodeOf(static_cast<v1::ErrorReason>(reason)), code) << ReasonName(reason);
  }
}

TEST_F(ClientErrorsTest, ReleasedTensorIsTensorNotFound) {
  tc::Tensor x = Put({1, 2});
  tc::Tensor copy = x;
  const uint64_t h = x.handle();
  ASSERT_OK(x.Release());
  EXPECT_TRUE(copy.released());
  absl::Status get = Status(copy.ToHost());
  EXPECT_TRUE(ClientRefusal(get, v1::TENSOR_NOT_FOUND, {"tensor_id"}));
  EXPECT_EQ(tc::MetadataOf(get)["tensor_id"], absl::StrCat(h));
  ASSERT_TRUE(tc::ResourceInfoOf(get).has_value());
  EXPECT_EQ(tc::ResourceInfoOf(get)->resource_name(), absl::StrCat(h));
  EXPECT_TRUE(SameAsServer(get, Status(session().Get(h))));
  // The server's own answer, given early, keeps the server's domain.
  EXPECT_EQ(tc::ErrorInfoOf(get)->domain(), "tensord");

  absl::Status op = Status(tc::Relu(copy));
  EXPECT_TRUE(ClientRefusal(op, v1::TENSOR_NOT_FOUND, kOperandKeys));
  EXPECT_TRUE(SameAsServer(op, Status(session().Op1("relu", {tc::Operand::Handle(h)}))));

  tc::Batch batch = session().NewBatch();
  batch.Add("neg", {tc::HostTensor(std::vector<float>{1})});
  batch.Add("add", {copy, 1.0});
  absl::Status run = Status(batch.Run());
  EXPECT_TRUE(ClientRefusal(run, v1::TENSOR_NOT_FOUND, kOperandKeys));
  EXPECT_EQ(tc::MetadataOf(run)["call_index"], "1");

  absl::Status release = Status(session().Release(std::vector<tc::Tensor>{copy}));
  EXPECT_TRUE(ClientRefusal(release, v1::TENSOR_NOT_FOUND, {"tensor_id"}));
  EXPECT_TRUE(SameAsServer(release, Status(session().Release(std::vector<uint64_t>{h}))));
}

TEST_F(ClientErrorsTest, ReleasedBackwardRootIsTensorNotFound) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       session().Put(tc::HostTensor(std::vector<float>{1, 2}), {true, ctx.id()}));
  ASSERT_OK_AND_ASSIGN(tc::Tensor loss, tc::Sum(w));
  const uint64_t h = loss.handle();
  ASSERT_OK(loss.Release());
  absl::Status backward = Status(ctx.Backward({loss}));
  EXPECT_TRUE(ClientRefusal(backward, v1::TENSOR_NOT_FOUND, {"tensor_id", "root_index"}));
  EXPECT_TRUE(SameAsServer(backward, RawBackward(session().id(), ctx.id(), h)));
  tc::Tensor seed = Put({1});
  ASSERT_OK(seed.Release());
  EXPECT_TRUE(ClientRefusal(Status(ctx.Backward({*tc::Sum(w)}, {seed})), v1::TENSOR_NOT_FOUND,
                            {"tensor_id", "seed_index"}));
}

TEST_F(ClientErrorsTest, TensorOfAnotherSessionIsTensorNotFound) {
  ASSERT_OK_AND_ASSIGN(tc::Session other, client().CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor mine, other.Put(tc::HostTensor(std::vector<float>{0, 0})));
  tc::Tensor theirs = Put({1, 2});
  // The same handle number names another tensor in `other`: refused, never used.
  ASSERT_EQ(mine.handle(), theirs.handle());
  absl::Status op = Status(other.Op1("neg", {theirs}));
  EXPECT_TRUE(ClientRefusal(op, v1::TENSOR_NOT_FOUND, kOperandKeys));
  EXPECT_THAT(std::string(op.message()), HasSubstr(session().id()));
  tc::Tensor far = Put({3});  // a handle `other` does not have
  EXPECT_TRUE(SameAsServer(op, Status(other.Op1("neg", {tc::Operand::Handle(far.handle())}))));
  EXPECT_TRUE(ClientRefusal(Status(mine + theirs), v1::TENSOR_NOT_FOUND, kOperandKeys));

  absl::Status get = Status(other.Get(theirs));
  EXPECT_TRUE(ClientRefusal(get, v1::TENSOR_NOT_FOUND, {"tensor_id"}));
  EXPECT_TRUE(SameAsServer(get, Status(other.Get(far.handle()))));
  absl::Status release = Status(other.Release(std::vector<tc::Tensor>{mine, theirs}));
  EXPECT_TRUE(ClientRefusal(release, v1::TENSOR_NOT_FOUND, {"tensor_id"}));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, other.Info());
  EXPECT_EQ(info.tensors.size(), 1u);  // nothing released
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, other.OpenAutodiff());
  EXPECT_TRUE(ClientRefusal(Status(ctx.Backward({theirs})), v1::TENSOR_NOT_FOUND,
                            {"tensor_id", "root_index"}));
  EXPECT_THAT(Floats(theirs), ::testing::ElementsAre(1, 2));

  // An attached Session is the same server session: its tensors are not another session's.
  ASSERT_OK_AND_ASSIGN(tc::Session attached, client().AttachSession(session().id()));
  EXPECT_OK(attached.Op1("neg", {theirs}));
}

TEST_F(ClientErrorsTest, ClosedSessionIsSessionNotFound) {
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, s.Put(tc::HostTensor(std::vector<float>{1})));
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, s.OpenAutodiff());
  const std::string id = s.id();
  ASSERT_OK(s.Close());
  tc::Batch batch = s.NewBatch();
  batch.Add("neg", {t});
  const std::vector<absl::Status> refused = {Status(t.ToHost()),
                                             Status(tc::Relu(t)),
                                             Status(s.KeepAlive()),
                                             Status(s.Info()),
                                             Status(s.Put(tc::HostTensor(std::vector<float>{1}))),
                                             Status(s.Release(std::vector<tc::Tensor>{t})),
                                             Status(s.OpenAutodiff()),
                                             Status(batch.Run()),
                                             Status(ctx.Backward({t})),
                                             Status(t.Release())};
  for (const absl::Status& status : refused) {
    EXPECT_TRUE(ClientRefusal(status, v1::SESSION_NOT_FOUND, {"session_id"}));
    EXPECT_EQ(tc::MetadataOf(status)["session_id"], id);
  }
  grpc::ClientContext context;
  v1::GetSessionInfoRequest request;
  request.set_session_id(id);
  v1::GetSessionInfoResponse response;
  EXPECT_TRUE(SameAsServer(
      refused[0], tc::FromGrpcStatus(RawStub()->GetSessionInfo(&context, request, &response))));
  EXPECT_OK(ctx.Close());  // closed with its session: nothing to send
  // A tensor of the closed session names nothing in another one.
  EXPECT_TRUE(ClientRefusal(Status(session().Op1("neg", {t})), v1::TENSOR_NOT_FOUND, kOperandKeys));
}

TEST_F(ClientErrorsTest, OtherRefusalsCarryTheirReasonAndCode) {
  tc::Tensor x = Put({1, 2, 3, 4});
  // Bytes that do not fill the shape: what the server answers a literal of them with.
  tc::HostTensor bad(tc::DType::kF32, {3}, std::string(8, '\0'));
  absl::Status put = Status(session().Put(bad));
  EXPECT_TRUE(ClientRefusal(put, v1::BAD_TENSOR_DATA, {"shape", "dtype", "bytes"}));
  ASSERT_TRUE(tc::BadRequestOf(put).has_value());
  EXPECT_TRUE(
      SameAsServer(put, Status(session().Op("neg", {bad})), {"call_index", "input_index", "op"}));

  tc::Tensor undefined;
  absl::Status named = Status(session().Op1("neg", {undefined}));
  EXPECT_TRUE(ClientRefusal(named, v1::TENSOR_NOT_FOUND, kOperandKeys));
  EXPECT_TRUE(SameAsServer(named, Status(session().Op1("neg", {tc::Operand::Handle(0)}))));
  EXPECT_TRUE(ClientRefusal(Status(undefined.ToHost()), v1::TENSOR_NOT_FOUND, {"tensor_id"}));
  EXPECT_TRUE(ClientRefusal(Status(tc::Relu(undefined)), v1::BAD_OPERAND, {"op"}));

  absl::Status one = Status(session().Op1("split", {x}, {{"split_size", 2}}));
  EXPECT_TRUE(ClientRefusal(one, v1::INVALID_REQUEST, {"op"}));
  // A check only the client has keeps the client's domain.
  EXPECT_EQ(tc::ErrorInfoOf(one)->domain(), "tensord.client");
  EXPECT_TRUE(ClientRefusal(Status(x.Item()), v1::SHAPE_MISMATCH, {"shape"}));
  EXPECT_TRUE(ClientRefusal(Status(x.ToVector<int32_t>()), v1::DTYPE_MISMATCH, {"dtype"}));

  tc::Session moved = std::move(session());
  absl::Status gone = Status(session().KeepAlive());
  EXPECT_TRUE(ClientRefusal(gone, v1::SESSION_NOT_FOUND, {"session_id"}));
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound);

  // A local file is no request: a plain status, no tensord reason.
  absl::Status missing = Status(tc::HostTensor::ReadNpy(::testing::TempDir() + "/no.npy"));
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(tc::ErrorInfoOf(missing).has_value());
}

}  // namespace
}  // namespace tensord::service_test
