// Every string a request can carry, 5,000 bytes long, on every RPC, sent through a channel with
// gRPC's default arguments (the 8 KiB metadata limit every gRPC client applies): the answer is
// the typed error a short wrong value gets, with its details intact, and it quotes the value
// cut to a prefix with its length. The strings are found by walking the request descriptors,
// so a string field added to a request is covered once its expected reason is in the table.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "server/core/quoted_value.h"
#include "server/core/status.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// One string slot of a request set to the long value: where it is, and the whole request.
struct Variant {
  std::string path;
  std::unique_ptr<Message> request;
};

std::unique_ptr<Message> Clone(const Message& m) {
  std::unique_ptr<Message> copy(m.New());
  copy->CopyFrom(m);
  return copy;
}

std::vector<Variant> EachStringSlot(const Message& m, const std::string& prefix,
                                    const std::string& value);

// The slots of map field `f` of `m`: a new entry with `value` as its key (the first entry's
// value copied), and the slots of each entry's value. Through the typed API: a map changed
// through reflection (AddMessage) crashed inside protobuf 3.21's map-to-repeated sync in the
// TSan build. A request map without a case here fails the test, so a new one gets one.
void MapSlots(const Message& m, const FieldDescriptor* f, const std::string& path,
              const std::string& value, std::vector<Variant>* out) {
  const auto* call = dynamic_cast<const v1::OpCall*>(&m);
  if (call == nullptr || f->name() != "attrs") {
    ADD_FAILURE() << "no case for the map " << f->full_name() << " in MapSlots";
    return;
  }
  if (call->attrs().empty()) return;  // the template gives the map an entry to copy
  auto with_key = std::make_unique<v1::OpCall>(*call);
  (*with_key->mutable_attrs())[value] = call->attrs().begin()->second;
  out->push_back({absl::StrCat(path, "{key}"), std::move(with_key)});
  for (const auto& [key, attr] : call->attrs()) {
    for (Variant& v : EachStringSlot(attr, absl::StrCat(path, ".value"), value)) {
      auto copy = std::make_unique<v1::OpCall>(*call);
      (*copy->mutable_attrs())[key].CopyFrom(*v.request);
      out->push_back({std::move(v.path), std::move(copy)});
    }
  }
}

// A copy of `m` per string slot, with `value` in that slot: each singular string (set or not),
// a new element of each repeated string, a new entry with that key in each map with string
// keys (the first entry's value copied), and recursively the slots of set messages and of map
// values. Each copy is built from `m` afresh, never restored in place.
std::vector<Variant> EachStringSlot(const Message& m, const std::string& prefix,
                                    const std::string& value) {
  std::vector<Variant> out;
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string path = prefix.empty() ? f->name() : absl::StrCat(prefix, ".", f->name());
    // The variants of `sub`, the j-th (or only) message of f, each put into a copy of m.
    auto nest = [&](const Message& sub, int j, const std::string& sub_path) {
      for (Variant& v : EachStringSlot(sub, sub_path, value)) {
        std::unique_ptr<Message> copy = Clone(m);
        const Reflection* cr = copy->GetReflection();
        Message* slot = f->is_repeated() ? cr->MutableRepeatedMessage(copy.get(), f, j)
                                         : cr->MutableMessage(copy.get(), f);
        slot->CopyFrom(*v.request);
        out.push_back({std::move(v.path), std::move(copy)});
      }
    };
    if (f->is_map()) {
      MapSlots(m, f, path, value, &out);
      continue;
    }
    if (f->type() == FieldDescriptor::TYPE_STRING) {
      std::unique_ptr<Message> copy = Clone(m);
      if (f->is_repeated()) {
        copy->GetReflection()->AddString(copy.get(), f, value);
        out.push_back({absl::StrCat(path, "[]"), std::move(copy)});
      } else {
        copy->GetReflection()->SetString(copy.get(), f, value);
        out.push_back({path, std::move(copy)});
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (f->is_repeated()) {
        for (int j = 0; j < r->FieldSize(m, f); ++j) {
          nest(r->GetRepeatedMessage(m, f, j), j, absl::StrCat(path, "[", j, "]"));
        }
      } else if (r->HasField(m, f)) {
        nest(r->GetMessage(m, f), 0, path);
      }
    }
  }
  return out;
}

// The reason each oversized slot must get: the same as a short wrong value in that slot.
const std::map<std::string, std::string>& ExpectedReasons() {
  static const auto* table = new std::map<std::string, std::string>{
      {"CreateSession device", "DEVICE_NOT_FOUND"},
      {"CreateSession float32_matmul_precision", "INVALID_REQUEST"},
      {"KeepAlive session_id", "SESSION_NOT_FOUND"},
      {"CloseSession session_id", "SESSION_NOT_FOUND"},
      {"GetSessionInfo session_id", "SESSION_NOT_FOUND"},
      {"PutTensor header.session_id", "SESSION_NOT_FOUND"},
      {"PutTensor header.device", "DEVICE_NOT_FOUND"},
      {"GetTensor session_id", "SESSION_NOT_FOUND"},
      {"GetTensor shared_memory.region", "SHARED_MEMORY_NOT_FOUND"},
      {"Execute session_id", "SESSION_NOT_FOUND"},
      {"Execute calls[0].op", "UNKNOWN_OP"},
      {"Execute calls[0].attrs{key}", "BAD_ATTRIBUTE"},
      {"Execute calls[0].attrs.value.s", "BAD_ATTRIBUTE"},
      {"Release session_id", "SESSION_NOT_FOUND"},
      {"OpenAutodiffContext session_id", "SESSION_NOT_FOUND"},
      {"CloseAutodiffContext session_id", "SESSION_NOT_FOUND"},
      {"Backward session_id", "SESSION_NOT_FOUND"},
      {"CompileProgram session_id", "SESSION_NOT_FOUND"},
      {"CompileProgram parameters[0].name", "INVALID_REQUEST"},
      {"CompileProgram calls[0].op", "UNKNOWN_OP"},
      {"CompileProgram calls[0].attrs{key}", "BAD_ATTRIBUTE"},
      {"CompileProgram calls[0].attrs.value.s", "BAD_ATTRIBUTE"},
      {"RunProgram session_id", "SESSION_NOT_FOUND"},
      {"ReleaseProgram session_id", "SESSION_NOT_FOUND"},
      {"RegisterSharedMemory session_id", "SESSION_NOT_FOUND"},
      {"RegisterSharedMemory region.name", "INVALID_REQUEST"},
      {"RegisterSharedMemory region.key", "INVALID_REQUEST"},
      {"UnregisterSharedMemory session_id", "SESSION_NOT_FOUND"},
      {"UnregisterSharedMemory name", "SHARED_MEMORY_NOT_FOUND"},
      {"JoinGroup session_id", "SESSION_NOT_FOUND"},
      {"JoinGroup group", "INVALID_REQUEST"},
      {"JoinGroup rendezvous", "INVALID_REQUEST"},
      {"LeaveGroup session_id", "SESSION_NOT_FOUND"},
  };
  return *table;
}

// A shared memory object for the regions of the shared memory RPCs' templates.
constexpr char kRegionObjectPrefix[] = "/tensord-oversized-";

class OversizedInputTest : public ServiceTest {
 protected:
  // The server serves shared memory, so those RPCs' templates succeed.
  static void SetUpTestSuite() {
    ServerOptions options = TestServerOptions();
    options.shared_memory = true;
    options.shared_memory_key_prefix = kRegionObjectPrefix;
    options.collective_address = "127.0.0.1";
    env_ = StartServer(options).release();
    char dir[] = "/tmp/tensord-oversized-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    rendezvous_ = absl::StrCat("file://", dir);
    object_key_ = absl::StrCat(kRegionObjectPrefix, getpid());
    const int fd = shm_open(object_key_.c_str(), O_RDWR | O_CREAT, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 4096), 0);
    close(fd);
  }
  static void TearDownTestSuite() {
    shm_unlink(object_key_.c_str());
    ServiceTest::TearDownTestSuite();
  }

  void SetUp() override {
    ServiceTest::SetUp();
    // A channel with no arguments: the limits of any gRPC client, not the tensord client's.
    stub_ = v1::Tensord::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server().port()),
                                                     grpc::InsecureChannelCredentials()));
    session_id_ = session().id();
    absl::StatusOr<tc::Tensor> x =
        session().Put(tc::HostTensor(std::vector<float>{0.5f, -1.0f}, {2}));
    ASSERT_TRUE(x.ok()) << x.status();
    x_ = x->handle();
    v1::OpenAutodiffContextRequest open;
    open.set_session_id(session_id_);
    v1::OpenAutodiffContextResponse opened;
    grpc::ClientContext context;
    ASSERT_TRUE(stub_->OpenAutodiffContext(&context, open, &opened).ok());
    context_id_ = opened.context_id();
    // A root for Backward: sum(w) of a requires-grad leaf w of the context.
    absl::StatusOr<tc::Tensor> w =
        session().Put(tc::HostTensor(std::vector<float>{1.0f, 2.0f}, {2}), {true, context_id_});
    ASSERT_TRUE(w.ok()) << w.status();
    v1::ExecuteRequest sum;
    sum.set_session_id(session_id_);
    sum.set_context_id(context_id_);
    v1::OpCall* call = sum.add_calls();
    call->set_op("sum");
    call->add_inputs()->set_handle(w->handle());
    v1::ExecuteResponse summed;
    grpc::ClientContext sum_context;
    ASSERT_TRUE(stub_->Execute(&sum_context, sum, &summed).ok());
    root_ = summed.results(0).outputs(0).handle();
    region_ = Registered();
  }

  // A request registering a new region of the object (under a name not used before).
  std::unique_ptr<v1::RegisterSharedMemoryRequest> RegisterRegion() {
    auto r = std::make_unique<v1::RegisterSharedMemoryRequest>();
    r->set_session_id(session_id_);
    r->mutable_region()->set_name(absl::StrCat("region-", ++regions_));
    r->mutable_region()->set_key(object_key_);
    r->mutable_region()->set_byte_size(64);
    return r;
  }
  // The name of a newly registered region.
  std::string Registered() {
    std::unique_ptr<v1::RegisterSharedMemoryRequest> r = RegisterRegion();
    v1::RegisterSharedMemoryResponse out;
    grpc::ClientContext context;
    const grpc::Status registered = stub_->RegisterSharedMemory(&context, *r, &out);
    EXPECT_TRUE(registered.ok()) << registered.error_message();
    return r->region().name();
  }

  // A request of `method` that succeeds as it stands, so each failure comes from the one slot.
  std::unique_ptr<Message> Template(const std::string& method) {
    if (method == "CreateSession") {
      auto r = std::make_unique<v1::CreateSessionRequest>();
      r->set_device("cpu");
      return r;
    }
    if (method == "PutTensor") {
      auto r = std::make_unique<v1::PutHeader>();
      r->set_session_id(session_id_);
      r->set_dtype(v1::DTYPE_F32);
      r->add_shape(2);
      r->set_device("cpu");
      return r;
    }
    if (method == "Execute") {
      auto r = std::make_unique<v1::ExecuteRequest>();
      r->set_session_id(session_id_);
      v1::OpCall* call = r->add_calls();
      call->set_op("gelu");
      call->add_inputs()->set_handle(x_);
      (*call->mutable_attrs())["approximate"].set_s("tanh");
      return r;
    }
    if (method == "GetTensor") {
      auto r = std::make_unique<v1::GetTensorRequest>();
      r->set_session_id(session_id_);
      r->set_handle(x_);
      r->mutable_shared_memory()->set_region(region_);
      return r;
    }
    if (method == "RegisterSharedMemory") return RegisterRegion();
    if (method == "JoinGroup") {  // a group of one: joins at once
      auto r = std::make_unique<v1::JoinGroupRequest>();
      r->set_session_id(session_id_);
      r->set_group(absl::StrCat("oversized-", ++groups_));
      r->set_world_size(1);
      r->set_rendezvous(rendezvous_);
      return r;
    }
    if (method == "LeaveGroup") {
      auto r = std::make_unique<v1::LeaveGroupRequest>();
      r->set_session_id(session_id_);
      return r;
    }
    if (method == "UnregisterSharedMemory") {
      auto r = std::make_unique<v1::UnregisterSharedMemoryRequest>();
      r->set_session_id(session_id_);
      r->set_name(Registered());
      return r;
    }
    if (method == "CloseAutodiffContext") {
      auto r = std::make_unique<v1::CloseAutodiffContextRequest>();
      r->set_session_id(session_id_);
      r->set_context_id(context_id_);
      return r;
    }
    if (method == "Backward") {
      auto r = std::make_unique<v1::BackwardRequest>();
      r->set_session_id(session_id_);
      r->set_context_id(context_id_);
      r->add_roots(root_);
      r->set_retain_graph(true);
      return r;
    }
    if (method == "CompileProgram") return CompileGelu();
    if (method == "RunProgram") {
      auto r = std::make_unique<v1::RunProgramRequest>();
      r->set_session_id(session_id_);
      r->set_program_id(Compiled());
      r->add_inputs()->set_handle(x_);
      return r;
    }
    if (method == "ReleaseProgram") {
      auto r = std::make_unique<v1::ReleaseProgramRequest>();
      r->set_session_id(session_id_);
      r->set_program_id(Compiled());
      return r;
    }
    std::unique_ptr<Message> r = Blank(method);
    if (const FieldDescriptor* f = r->GetDescriptor()->FindFieldByName("session_id")) {
      r->GetReflection()->SetString(r.get(), f, session_id_);
    }
    return r;
  }

  // gelu(x, approximate="tanh") of one parameter x, as a program.
  std::unique_ptr<v1::CompileProgramRequest> CompileGelu() {
    auto r = std::make_unique<v1::CompileProgramRequest>();
    r->set_session_id(session_id_);
    v1::ProgramParameter* x = r->add_parameters();
    x->set_name("x");
    x->mutable_example()->set_handle(x_);
    v1::OpCall* call = r->add_calls();
    call->set_op("gelu");
    call->add_inputs()->set_parameter(0);
    (*call->mutable_attrs())["approximate"].set_s("tanh");
    return r;
  }

  // A newly compiled CompileGelu program.
  uint64_t Compiled() {
    v1::CompileProgramResponse out;
    grpc::ClientContext context;
    const grpc::Status compiled = stub_->CompileProgram(&context, *CompileGelu(), &out);
    EXPECT_TRUE(compiled.ok()) << compiled.error_message();
    return out.program_id();
  }

  static std::unique_ptr<Message> Blank(const std::string& method) {
    const google::protobuf::MethodDescriptor* m = Service()->FindMethodByName(method);
    return std::unique_ptr<Message>(google::protobuf::MessageFactory::generated_factory()
                                        ->GetPrototype(m->input_type())
                                        ->New());
  }

  static const google::protobuf::ServiceDescriptor* Service() {
    return google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
        "tensord.v1.Tensord");
  }

  // Sends `request` (for PutTensor: the header, then two elements of data) as `method`.
  grpc::Status Send(const std::string& method, const Message& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto as = [&request](auto* typed) {
      typed->CopyFrom(request);
      return typed;
    };
    if (method == "CreateSession") {
      v1::CreateSessionRequest r;
      v1::CreateSessionResponse out;
      return stub_->CreateSession(&context, *as(&r), &out);
    }
    if (method == "KeepAlive") {
      v1::KeepAliveRequest r;
      v1::KeepAliveResponse out;
      return stub_->KeepAlive(&context, *as(&r), &out);
    }
    if (method == "CloseSession") {
      v1::CloseSessionRequest r;
      v1::CloseSessionResponse out;
      return stub_->CloseSession(&context, *as(&r), &out);
    }
    if (method == "GetSessionInfo") {
      v1::GetSessionInfoRequest r;
      v1::GetSessionInfoResponse out;
      return stub_->GetSessionInfo(&context, *as(&r), &out);
    }
    if (method == "ListDevices") {
      v1::ListDevicesRequest r;
      v1::ListDevicesResponse out;
      return stub_->ListDevices(&context, *as(&r), &out);
    }
    if (method == "ListOps") {
      v1::ListOpsRequest r;
      v1::ListOpsResponse out;
      return stub_->ListOps(&context, *as(&r), &out);
    }
    if (method == "PutTensor") {
      v1::PutTensorResponse out;
      auto writer = stub_->PutTensor(&context, &out);
      v1::PutTensorRequest part;
      as(part.mutable_header());
      writer->Write(part);
      part.set_chunk(std::string(8, '\0'));
      writer->Write(part);
      writer->WritesDone();
      return writer->Finish();
    }
    if (method == "GetTensor") {
      v1::GetTensorRequest r;
      auto reader = stub_->GetTensor(&context, *as(&r));
      v1::GetTensorResponse part;
      while (reader->Read(&part)) {
      }
      return reader->Finish();
    }
    if (method == "Execute") {
      v1::ExecuteRequest r;
      v1::ExecuteResponse out;
      return stub_->Execute(&context, *as(&r), &out);
    }
    if (method == "Release") {
      v1::ReleaseRequest r;
      v1::ReleaseResponse out;
      return stub_->Release(&context, *as(&r), &out);
    }
    if (method == "OpenAutodiffContext") {
      v1::OpenAutodiffContextRequest r;
      v1::OpenAutodiffContextResponse out;
      return stub_->OpenAutodiffContext(&context, *as(&r), &out);
    }
    if (method == "CloseAutodiffContext") {
      v1::CloseAutodiffContextRequest r;
      v1::CloseAutodiffContextResponse out;
      return stub_->CloseAutodiffContext(&context, *as(&r), &out);
    }
    if (method == "Backward") {
      v1::BackwardRequest r;
      v1::BackwardResponse out;
      return stub_->Backward(&context, *as(&r), &out);
    }
    if (method == "CompileProgram") {
      v1::CompileProgramRequest r;
      v1::CompileProgramResponse out;
      return stub_->CompileProgram(&context, *as(&r), &out);
    }
    if (method == "RunProgram") {
      v1::RunProgramRequest r;
      v1::RunProgramResponse out;
      return stub_->RunProgram(&context, *as(&r), &out);
    }
    if (method == "ReleaseProgram") {
      v1::ReleaseProgramRequest r;
      v1::ReleaseProgramResponse out;
      return stub_->ReleaseProgram(&context, *as(&r), &out);
    }
    if (method == "RegisterSharedMemory") {
      v1::RegisterSharedMemoryRequest r;
      v1::RegisterSharedMemoryResponse out;
      return stub_->RegisterSharedMemory(&context, *as(&r), &out);
    }
    if (method == "UnregisterSharedMemory") {
      v1::UnregisterSharedMemoryRequest r;
      v1::UnregisterSharedMemoryResponse out;
      return stub_->UnregisterSharedMemory(&context, *as(&r), &out);
    }
    if (method == "JoinGroup") {
      v1::JoinGroupRequest r;
      v1::JoinGroupResponse out;
      return stub_->JoinGroup(&context, *as(&r), &out);
    }
    if (method == "LeaveGroup") {
      v1::LeaveGroupRequest r;
      v1::LeaveGroupResponse out;
      return stub_->LeaveGroup(&context, *as(&r), &out);
    }
    ADD_FAILURE() << "no way to send " << method << ": add it to Send and Template";
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, method);
  }

  // The checks of one oversized slot; `value` is what the slot held.
  void ExpectTypedAndBounded(const std::string& slot, const grpc::Status& sent,
                             const std::string& value) {
    SCOPED_TRACE(slot);
    auto expected = ExpectedReasons().find(slot);
    ASSERT_NE(expected, ExpectedReasons().end())
        << "a string slot without an expected reason; add it to ExpectedReasons";
    ASSERT_FALSE(sent.ok());
    const absl::Status status = tc::FromGrpcStatus(sent);
    EXPECT_EQ(tc::ReasonNameOf(status), expected->second) << status;
    std::optional<google::rpc::ErrorInfo> info = tc::ErrorInfoOf(status);
    ASSERT_TRUE(info.has_value()) << "details lost: " << status;
    // The value is quoted as its prefix and its length, never whole.
    EXPECT_FALSE(absl::StrContains(sent.error_message(), value));
    EXPECT_TRUE(absl::StrContains(sent.error_message(), absl::StrCat("(", value.size(), " bytes)")))
        << sent.error_message();
    for (const auto& [key, v] : info->metadata()) {
      EXPECT_LE(v.size(), kMaxQuotedBytes) << key;
    }
    // What travels: the percent-encoded message and the base64 details, far under 8 KiB.
    EXPECT_LT(sent.error_message().size() + absl::Base64Escape(sent.error_details()).size(), 4096u);
    // The session is unharmed.
    v1::KeepAliveRequest keep;
    keep.set_session_id(session_id_);
    v1::KeepAliveResponse kept;
    grpc::ClientContext context;
    EXPECT_TRUE(stub_->KeepAlive(&context, keep, &kept).ok());
  }

  // Every slot of every RPC holding `value`; returns the slots visited.
  std::vector<std::string> Drive(const std::string& value) {
    std::vector<std::string> slots;
    const google::protobuf::ServiceDescriptor* service = Service();
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string method = service->method(i)->name();
      std::unique_ptr<Message> request = Template(method);
      for (const Variant& v : EachStringSlot(*request, "", value)) {
        const std::string slot =
            absl::StrCat(method, " ", method == "PutTensor" ? "header." : "", v.path);
        slots.push_back(slot);
        ExpectTypedAndBounded(slot, Send(method, *v.request), value);
      }
      // Unchanged, the template succeeds: the failures above came from the oversized slots.
      if (method != "CloseSession" && method != "CloseAutodiffContext") {
        grpc::Status ok = Send(method, *request);
        EXPECT_TRUE(ok.ok()) << method << ": " << ok.error_message();
      }
    }
    return slots;
  }

  std::unique_ptr<v1::Tensord::Stub> stub_;
  std::string session_id_;
  static inline std::string rendezvous_;  // a directory of this process for JoinGroup
  static inline int groups_ = 0;          // group names are used once per store
  uint64_t x_ = 0;
  uint64_t context_id_ = 0;
  uint64_t root_ = 0;
  std::string region_;  // registered in the session, for GetTensor's template
  int regions_ = 0;
  static std::string object_key_;
};

std::string OversizedInputTest::object_key_;

TEST_F(OversizedInputTest, EveryQuotedStringOfEveryRpcIsCutAndTyped) {
  std::vector<std::string> slots = Drive(std::string(5000, 'x'));
  std::vector<std::string> expected;
  for (const auto& [slot, reason] : ExpectedReasons()) expected.push_back(slot);
  std::sort(slots.begin(), slots.end());
  EXPECT_EQ(slots, expected) << "the table lists slots the requests do not have";
}

TEST_F(OversizedInputTest, CutsFallOnUtf8CharacterBoundaries) {
  // "x" then 2-byte characters: a cut at an even byte count would split a character, and a
  // status with invalid UTF-8 fails to parse in the client, details and all.
  std::string value = "x";
  for (int i = 0; i < 2500; ++i) value += "\xc3\xa9";
  Drive(value);
}

TEST(ShortenedTest, KeepsShortValuesAndStatesTheLengthOfLongOnes) {
  EXPECT_EQ(Shortened("cpu"), "cpu");
  const std::string exact(kMaxQuotedBytes, 'a');
  EXPECT_EQ(Shortened(exact), exact);
  const std::string cut = Shortened(exact + "b");
  EXPECT_EQ(cut.size(), kMaxQuotedBytes);
  EXPECT_TRUE(absl::EndsWith(cut, absl::StrCat("...(", kMaxQuotedBytes + 1, " bytes)"))) << cut;
  EXPECT_EQ(Shortened(cut), cut);
  EXPECT_EQ(Utf8Prefix("a\xc3\xa9", 2), "a");
  EXPECT_EQ(Utf8Prefix("a\xc3\xa9", 3), "a\xc3\xa9");
}

TEST(ShortenedTest, ErrorsShortenLongMetadataWhereverTheMessageQuotesIt) {
  const std::string id(300, 'z');
  absl::Status s = Error(Reason::kSessionNotFound, absl::StrCat("no session '", id, "' (", id, ")"),
                         {{"session_id", id}});
  const std::string cut = Shortened(id);
  EXPECT_EQ(s.message(), absl::StrCat("no session '", cut, "' (", cut, ")"));
  EXPECT_EQ(GetMetadata(s).at("session_id"), cut);
  absl::Status more =
      WithMetadata(absl::InvalidArgumentError(absl::StrCat("op ", id)), {{"op", id}});
  EXPECT_EQ(more.message(), absl::StrCat("op ", cut));
  // The metadata separators inside a value do not split it.
  absl::Status sep = Error(Reason::kUnknownOp, "bad",
                           {{"op",
                             "a\x1e"
                             "b\x1f"
                             "c"}});
  EXPECT_EQ(GetMetadata(sep).size(), 1u);
}

}  // namespace
}  // namespace tensord::service_test
