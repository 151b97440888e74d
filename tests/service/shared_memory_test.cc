// Same-host shared memory: puts and gets through a registered region move the same bytes the
// streams move; every misuse (a region never registered, a span outside it, an object shrunk
// under the server, a key outside the allowed prefix, a server without --shared-memory) is a
// typed error that stores nothing and leaves the server serving; regions belong to their
// session and close with it.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/service/service_env.h"

namespace tensord::service_test {
namespace {

constexpr absl::StatusCode kInvalidArgument = absl::StatusCode::kInvalidArgument;
constexpr absl::StatusCode kFailedPrecondition = absl::StatusCode::kFailedPrecondition;
constexpr absl::StatusCode kNotFound = absl::StatusCode::kNotFound;

std::vector<float> Ramp(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.25f - 3.0f;
  return v;
}

// A shared memory object made by hand (the client class unlinks its name at once), for the
// tests that register raw requests or shrink the object under the server.
class ShmObject {
 public:
  explicit ShmObject(const std::string& key, off_t bytes) : key_(key) {
    fd_ = shm_open(key.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    EXPECT_GE(fd_, 0) << key;
    EXPECT_EQ(ftruncate(fd_, bytes), 0);
  }
  ~ShmObject() {
    close(fd_);
    shm_unlink(key_.c_str());
  }
  void Resize(off_t bytes) { EXPECT_EQ(ftruncate(fd_, bytes), 0); }
  const std::string& key() const { return key_; }

 private:
  std::string key_;
  int fd_ = -1;
};

std::string TestKey(const std::string& what) {
  return absl::StrCat("/tensord-test-", getpid(), "-", what);
}

int OpenFds() {
  int n = 0;
  DIR* dir = opendir("/proc/self/fd");
  while (dirent* e = readdir(dir)) n += e->d_name[0] != '.';
  closedir(dir);
  return n;
}

ServerOptions SharedMemoryServer() {
  ServerOptions options = TestServerOptions();
  options.shared_memory = true;
  options.shared_memory_key_prefix = "/tensord-";
  options.max_shared_memory_regions_per_session = 3;
  return options;
}

class SharedMemoryTest : public ServiceTest {
 protected:
  static void SetUpTestSuite() { env_ = StartServer(SharedMemoryServer()).release(); }

  absl::Status Register(const std::string& name, const std::string& key, uint64_t offset,
                        uint64_t bytes) {
    grpc::ClientContext ctx;
    v1::RegisterSharedMemoryRequest req;
    req.set_session_id(session().id());
    req.mutable_region()->set_name(name);
    req.mutable_region()->set_key(key);
    req.mutable_region()->set_offset(offset);
    req.mutable_region()->set_byte_size(bytes);
    v1::RegisterSharedMemoryResponse resp;
    return tc::FromGrpcStatus(RawStub()->RegisterSharedMemory(&ctx, req, &resp));
  }
  // A get through `region` at `offset`, by hand.
  absl::Status RawGet(const tc::Tensor& t, const std::string& region, uint64_t offset) {
    grpc::ClientContext ctx;
    v1::GetTensorRequest req;
    req.set_session_id(session().id());
    req.set_handle(t.handle());
    req.mutable_shared_memory()->set_region(region);
    req.mutable_shared_memory()->set_offset(offset);
    auto reader = RawStub()->GetTensor(&ctx, req);
    v1::GetTensorResponse msg;
    while (reader->Read(&msg)) {
    }
    return tc::FromGrpcStatus(reader->Finish());
  }
  // A put of `elements` f32 from `region` by hand, with a chunk after the header when `chunk`
  // is not empty (which the server must refuse).
  absl::Status RawPut(const std::string& region, int64_t elements, const std::string& chunk) {
    grpc::ClientContext ctx;
    v1::PutTensorResponse resp;
    auto writer = RawStub()->PutTensor(&ctx, &resp);
    v1::PutTensorRequest put;
    put.mutable_header()->set_session_id(session().id());
    put.mutable_header()->set_dtype(v1::DTYPE_F32);
    put.mutable_header()->add_shape(elements);
    put.mutable_header()->mutable_shared_memory()->set_region(region);
    writer->Write(put);
    if (!chunk.empty()) {
      v1::PutTensorRequest next;
      next.set_chunk(chunk);
      writer->Write(next);
    }
    writer->WritesDone();
    return tc::FromGrpcStatus(writer->Finish());
  }
  size_t Tensors() {
    absl::StatusOr<tc::SessionInfo> info = session().Info();
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->tensors.size() : 0;
  }
};

TEST_F(SharedMemoryTest, PutAndGetMoveTheSameBytesAsTheStreams) {
  ASSERT_OK_AND_ASSIGN(tc::SharedMemory shm, tc::SharedMemory::Create(session(), 1 << 20));
  const tc::HostTensor f32(Ramp(3000), {30, 100});
  const tc::HostTensor f64(std::vector<double>{1.5, -2.25, 1e300, -0.0}, {2, 2});
  const tc::HostTensor i64(std::vector<int64_t>{INT64_MIN, -1, 0, INT64_MAX}, {4});
  const tc::HostTensor flags(std::vector<bool>{true, false, true}, {3});
  // At offset 0 and at odd offsets, which the server reads with no alignment needed.
  uint64_t offset = 0;
  for (const tc::HostTensor* value : {&f32, &f64, &i64, &flags}) {
    ASSERT_OK_AND_ASSIGN(tc::Tensor t, shm.Put(*value, {}, offset));
    EXPECT_EQ(t.shape(), value->shape());
    EXPECT_EQ(t.dtype(), value->dtype());
    ASSERT_OK_AND_ASSIGN(tc::HostTensor streamed, session().Get(t));
    EXPECT_EQ(streamed.bytes(), value->bytes());
    // Read back at another place of the region than it came from.
    ASSERT_OK_AND_ASSIGN(tc::HostTensor back, shm.Get(t, offset + 100003));
    EXPECT_EQ(back.bytes(), value->bytes());
    EXPECT_EQ(std::string(shm.data() + offset + 100003, value->nbytes()), value->bytes());
    offset += value->nbytes() + 7;
  }
  // An op result computed on the server, fetched through the region.
  ASSERT_OK_AND_ASSIGN(tc::Tensor x, shm.Put(tc::HostTensor(std::vector<float>{1, 2, 3})));
  ASSERT_OK_AND_ASSIGN(tc::Tensor y, session().Op1("mul", {x, x}));
  ASSERT_OK_AND_ASSIGN(tc::HostTensor sq, shm.Get(y));
  EXPECT_EQ(sq.ToDoubles(), (std::vector<double>{1, 4, 9}));
}

TEST_F(SharedMemoryTest, PutMakesRequiresGradLeaves) {
  ASSERT_OK_AND_ASSIGN(tc::AutodiffContext ctx, session().OpenAutodiff());
  ASSERT_OK_AND_ASSIGN(tc::SharedMemory shm, tc::SharedMemory::Create(session(), 4096));
  ASSERT_OK_AND_ASSIGN(tc::Tensor w,
                       shm.Put(tc::HostTensor(std::vector<double>{1, -2, 3}), {true, ctx.id()}));
  EXPECT_TRUE(w.requires_grad());
  ASSERT_OK_AND_ASSIGN(tc::Tensor loss, session().Op1("sum", {session().Op1("mul", {w, w})}));
  ASSERT_OK_AND_ASSIGN(tc::Gradients g, ctx.Backward({loss}));
  EXPECT_EQ(Doubles(g.grad(w)), (std::vector<double>{2, -4, 6}));
}

TEST_F(SharedMemoryTest, SpansOutsideTheRegionAreRefusedAndStoreNothing) {
  ASSERT_OK_AND_ASSIGN(tc::SharedMemory shm, tc::SharedMemory::Create(session(), 64));
  ASSERT_OK_AND_ASSIGN(tc::Tensor small, shm.Put(tc::HostTensor(Ramp(4))));
  const size_t before = Tensors();
  // 17 floats do not fit 64 bytes; 4 floats at offset 60 neither; nor any offset past the end.
  EXPECT_TRUE(FailsWith(Status(shm.PutAt(tc::DType::kF32, {17}, 0)), kInvalidArgument,
                        v1::INVALID_REQUEST,
                        {{"field", "shared_memory.offset"},
                         {"region", shm.name()},
                         {"bytes", "68"},
                         {"region_bytes", "64"}}));
  EXPECT_TRUE(FailsWith(Status(shm.PutAt(tc::DType::kF32, {4}, 60)), kInvalidArgument,
                        v1::INVALID_REQUEST, {{"offset", "60"}}));
  EXPECT_TRUE(FailsWith(Status(shm.PutAt(tc::DType::kF32, {0}, UINT64_MAX)), kInvalidArgument,
                        v1::INVALID_REQUEST));
  EXPECT_TRUE(FailsWith(shm.GetAt(small, 49), kInvalidArgument, v1::INVALID_REQUEST,
                        {{"field", "shared_memory.offset"}}));
  EXPECT_EQ(Tensors(), before);
  // An empty tensor fits anywhere in the region, its end included.
  ASSERT_OK_AND_ASSIGN(tc::Tensor empty, shm.PutAt(tc::DType::kF32, {0, 3}, 64));
  EXPECT_EQ(empty.shape(), (tc::Shape{0, 3}));
}

TEST_F(SharedMemoryTest, UnknownAndUnregisteredRegionsAreNotFound) {
  ASSERT_OK_AND_ASSIGN(tc::SharedMemory shm, tc::SharedMemory::Create(session(), 4096, "weights"));
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, shm.Put(tc::HostTensor(Ramp(8))));
  ASSERT_OK_AND_ASSIGN(tc::SessionInfo info, session().Info());
  ASSERT_EQ(info.shared_memory.size(), 1u);
  EXPECT_EQ(info.shared_memory[0].name, "weights");
  EXPECT_EQ(info.shared_memory[0].key, shm.key());
  EXPECT_EQ(info.shared_memory[0].byte_size, 4096u);
  EXPECT_TRUE(FailsWith(RawGet(t, "nope", 0), kNotFound, v1::SHARED_MEMORY_NOT_FOUND,
                        {{"region", "nope"}}));
  ASSERT_OK(shm.Unregister());
  EXPECT_TRUE(FailsWith(Status(shm.Put(tc::HostTensor(Ramp(8)))), kNotFound,
                        v1::SHARED_MEMORY_NOT_FOUND, {{"region", "weights"}}));
  EXPECT_TRUE(FailsWith(shm.Unregister(), kNotFound, v1::SHARED_MEMORY_NOT_FOUND));
  ASSERT_OK_AND_ASSIGN(info, session().Info());
  EXPECT_TRUE(info.shared_memory.empty());
  // The tensor put before is unaffected.
  EXPECT_EQ(Floats(t), Ramp(8));
}

TEST_F(SharedMemoryTest, RegionsBelongToTheirSession) {
  ASSERT_OK_AND_ASSIGN(tc::SharedMemory shm, tc::SharedMemory::Create(session(), 4096, "mine"));
  ASSERT_OK_AND_ASSIGN(tc::Session other, client().CreateSession());
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, other.Put(tc::HostTensor(Ramp(4))));
  grpc::ClientContext ctx;
  v1::GetTensorRequest req;
  req.set_session_id(other.id());
  req.set_handle(t.handle());
  req.mutable_shared_memory()->set_region("mine");
  auto reader = RawStub()->GetTensor(&ctx, req);
  v1::GetTensorResponse msg;
  while (reader->Read(&msg)) {
  }
  EXPECT_TRUE(FailsWith(tc::FromGrpcStatus(reader->Finish()), kNotFound,
                        v1::SHARED_MEMORY_NOT_FOUND, {{"region", "mine"}}));
}

TEST_F(SharedMemoryTest, AShrunkObjectFailsTheCallNotTheServer) {
  ShmObject object(TestKey("shrink"), 4096);
  ASSERT_OK(Register("r", object.key(), 1024, 2048));
  ASSERT_OK_AND_ASSIGN(tc::Tensor t, session().Put(tc::HostTensor(Ramp(16))));
  ASSERT_OK(RawGet(t, "r", 0));
  object.Resize(1100);  // the region [1024, 3072) now ends past the object's end
  const size_t before = Tensors();
  EXPECT_TRUE(FailsWith(RawGet(t, "r", 0), kFailedPrecondition, v1::SHARED_MEMORY_UNAVAILABLE,
                        {{"region", "r"}, {"cause", "too_small"}, {"key", object.key()}}));
  EXPECT_TRUE(FailsWith(RawPut("r", 16, ""), kFailedPrecondition, v1::SHARED_MEMORY_UNAVAILABLE,
                        {{"cause", "too_small"}}));
  EXPECT_EQ(Tensors(), before);
  // Grown back, the same region serves again.
  object.Resize(4096);
  EXPECT_OK(RawGet(t, "r", 0));
}

TEST_F(SharedMemoryTest, APutFromSharedMemoryCarriesNoChunks) {
  ASSERT_OK_AND_ASSIGN(tc::SharedMemory shm, tc::SharedMemory::Create(session(), 4096));
  EXPECT_TRUE(FailsWith(RawPut(shm.name(), 4, std::string(16, 'x')), kInvalidArgument,
                        v1::INVALID_REQUEST, {{"field", "header.shared_memory"}}));
  EXPECT_EQ(Tensors(), 0u);
  // The header alone is a put.
  EXPECT_OK(RawPut(shm.name(), 4, ""));
  EXPECT_EQ(Tensors(), 1u);
}

TEST_F(SharedMemoryTest, RegistrationChecksNameKeyObjectAndLimit) {
  ShmObject object(TestKey("reg"), 4096);
  EXPECT_TRUE(FailsWith(Register("", object.key(), 0, 16), kInvalidArgument, v1::INVALID_REQUEST,
                        {{"field", "region.name"}}));
  EXPECT_TRUE(FailsWith(Register(std::string(129, 'n'), object.key(), 0, 16), kInvalidArgument,
                        v1::INVALID_REQUEST, {{"field", "region.name"}}));
  for (const std::string& key : {std::string("tensord-x"), std::string("/tensord-a/b"),
                                 std::string("/"), "/" + std::string(255, 'k')}) {
    EXPECT_TRUE(FailsWith(Register("k", key, 0, 16), kInvalidArgument, v1::INVALID_REQUEST,
                          {{"field", "region.key"}}))
        << key;
  }
  EXPECT_TRUE(FailsWith(Register("z", object.key(), 0, 0), kInvalidArgument, v1::INVALID_REQUEST,
                        {{"field", "region.byte_size"}}));
  EXPECT_TRUE(FailsWith(Register("big", object.key(), 4000, 97), kFailedPrecondition,
                        v1::SHARED_MEMORY_UNAVAILABLE, {{"cause", "too_small"}}));
  EXPECT_TRUE(FailsWith(Register("o", object.key(), UINT64_MAX, 2), kInvalidArgument,
                        v1::INVALID_REQUEST, {{"field", "region.offset"}}));
  EXPECT_TRUE(FailsWith(Register("gone", TestKey("never-made"), 0, 16), kFailedPrecondition,
                        v1::SHARED_MEMORY_UNAVAILABLE, {{"cause", "open"}}));
  // This server opens only keys under "/tensord-".
  ShmObject outside(absl::StrCat("/other-", getpid()), 4096);
  EXPECT_TRUE(FailsWith(Register("x", outside.key(), 0, 16), kFailedPrecondition,
                        v1::SHARED_MEMORY_UNAVAILABLE, {{"cause", "key_prefix"}}));
  ASSERT_OK(Register("a", object.key(), 0, 16));
  EXPECT_TRUE(FailsWith(Register("a", object.key(), 16, 16), kInvalidArgument, v1::INVALID_REQUEST,
                        {{"field", "region.name"}, {"region", "a"}}));
  ASSERT_OK(Register("b", object.key(), 16, 16));
  ASSERT_OK(Register("c", object.key(), 32, 16));
  EXPECT_TRUE(FailsWith(Register("d", object.key(), 48, 16), absl::StatusCode::kResourceExhausted,
                        v1::LIMIT_EXCEEDED, {{"limit", "max_shared_memory_regions_per_session"}}));
}

TEST_F(SharedMemoryTest, ClosingTheSessionClosesItsRegions) {
  ShmObject object(TestKey("close"), 4096);
  ASSERT_OK_AND_ASSIGN(tc::Session s, client().CreateSession());
  const int before = OpenFds();
  {
    grpc::ClientContext ctx;
    v1::RegisterSharedMemoryRequest req;
    req.set_session_id(s.id());
    req.mutable_region()->set_name("r");
    req.mutable_region()->set_key(object.key());
    req.mutable_region()->set_byte_size(4096);
    v1::RegisterSharedMemoryResponse resp;
    ASSERT_TRUE(RawStub()->RegisterSharedMemory(&ctx, req, &resp).ok());
  }
  EXPECT_EQ(OpenFds(), before + 1);  // the server holds the object open
  ASSERT_OK(s.Close());
  EXPECT_EQ(OpenFds(), before);
}

// A server started without --shared-memory refuses every region.
TEST(SharedMemoryOffTest, TheDefaultServerRefusesRegions) {
  std::unique_ptr<ServerAndClient> env = StartServer(TestServerOptions());
  ASSERT_NE(env, nullptr);
  ASSERT_OK_AND_ASSIGN(tc::Session s, env->client->CreateSession());
  EXPECT_TRUE(FailsWith(Status(tc::SharedMemory::Create(s, 4096)), kFailedPrecondition,
                        v1::SHARED_MEMORY_UNAVAILABLE, {{"cause", "disabled"}}));
  // Nothing is left in /dev/shm by the refused region.
  int left = 0;
  DIR* dir = opendir("/dev/shm");
  const std::string mine = absl::StrCat("tensord-", getpid(), "-");
  while (dirent* e = readdir(dir)) left += std::string(e->d_name).rfind(mine, 0) == 0;
  closedir(dir);
  EXPECT_EQ(left, 0);
}

}  // namespace
}  // namespace tensord::service_test
