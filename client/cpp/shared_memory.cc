#include "client/cpp/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cpp/internal.h"

namespace tensord::client {
namespace {

namespace v1 = ::tensord::v1;

absl::Status SystemError(const std::string& what) {
  return absl::InternalError(
      absl::StrCat("tensord: shared memory: ", what, ": ", std::strerror(errno)));
}

// "/tensord-<pid>-<64 random bits>": unique on the host, and gone from /dev/shm as soon as
// the server holds the object open.
std::string NewKey() {
  std::random_device rd;
  const uint64_t bits = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return absl::StrFormat("/tensord-%d-%016x", getpid(), bits);
}

}  // namespace

absl::StatusOr<SharedMemory> SharedMemory::Create(const Session& session, uint64_t bytes,
                                                  std::string name) {
  const std::shared_ptr<internal::SessionState>& state = session.state();
  if (!state) return internal::NoSession();
  if (absl::Status s = state->CheckOpen(); !s.ok()) return s;
  if (bytes == 0) {
    return internal::ServerAnswer(v1::INVALID_REQUEST,
                                  "tensord: a shared memory region needs at least one byte",
                                  {{"field", "region.byte_size"}});
  }
  const std::string key = NewKey();
  if (name.empty()) name = key.substr(1);
  const int fd = shm_open(key.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return SystemError(absl::StrCat("shm_open(", key, ")"));
  void* base = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0) {
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  const int error = errno;
  close(fd);  // the mapping keeps the object; the server opens it by name
  if (base == MAP_FAILED) {
    shm_unlink(key.c_str());
    errno = error;
    return SystemError(absl::StrCat("sizing and mapping ", bytes, " bytes"));
  }
  SharedMemory region(state, std::move(name), key, base, bytes);
  grpc::ClientContext context;
  state->Prepare(&context);
  v1::RegisterSharedMemoryRequest request;
  request.set_session_id(state->id());
  v1::SharedMemoryInfo* info = request.mutable_region();
  info->set_name(region.name_);
  info->set_key(key);
  info->set_byte_size(bytes);
  v1::RegisterSharedMemoryResponse response;
  grpc::Status status = state->stub().RegisterSharedMemory(&context, request, &response);
  // Registered or not, the name is no longer needed: the server holds the object open.
  shm_unlink(key.c_str());
  if (!status.ok()) return FromGrpcStatus(status);
  region.registered_ = true;
  return region;
}

SharedMemory::SharedMemory(SharedMemory&& other) noexcept
    : state_(std::move(other.state_)),
      name_(std::move(other.name_)),
      key_(std::move(other.key_)),
      base_(std::exchange(other.base_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      registered_(std::exchange(other.registered_, false)) {}

SharedMemory& SharedMemory::operator=(SharedMemory&& other) noexcept {
  if (this != &other) {
    Reset();
    state_ = std::move(other.state_);
    name_ = std::move(other.name_);
    key_ = std::move(other.key_);
    base_ = std::exchange(other.base_, nullptr);
    size_ = std::exchange(other.size_, 0);
    registered_ = std::exchange(other.registered_, false);
  }
  return *this;
}

SharedMemory::~SharedMemory() { Reset(); }

void SharedMemory::Reset() {
  if (registered_ && state_ && !state_->closed()) (void)Unregister();
  if (base_ != nullptr) munmap(base_, size_);
  base_ = nullptr;
  registered_ = false;
}

absl::Status SharedMemory::Unregister() {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  grpc::ClientContext context;
  state_->Prepare(&context);
  v1::UnregisterSharedMemoryRequest request;
  request.set_session_id(state_->id());
  request.set_name(name_);
  v1::UnregisterSharedMemoryResponse response;
  grpc::Status status = state_->stub().UnregisterSharedMemory(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  registered_ = false;
  return absl::OkStatus();
}

absl::StatusOr<Tensor> SharedMemory::Put(const HostTensor& value, const PutOptions& options,
                                         uint64_t offset) {
  if (absl::Status s = value.Validate(); !s.ok()) return s;
  if (base_ == nullptr) return internal::NoSession();
  // Out-of-range spans are left to the server, whose answer names the region's bounds.
  if (offset <= size_ && value.nbytes() <= size_ - offset) {
    std::memcpy(data() + offset, value.bytes().data(), value.nbytes());
  }
  return PutAt(value.dtype(), value.shape(), offset, options);
}

absl::StatusOr<Tensor> SharedMemory::PutAt(DType dtype, const Shape& shape, uint64_t offset,
                                           const PutOptions& options) {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  grpc::ClientContext context;
  state_->Prepare(&context);
  v1::PutTensorResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PutTensorRequest>> writer =
      state_->stub().PutTensor(&context, &response);
  v1::PutTensorRequest message;
  v1::PutHeader* header = message.mutable_header();
  header->set_session_id(state_->id());
  header->set_dtype(ToProto(dtype));
  for (int64_t d : shape) header->add_shape(d);
  header->set_device(options.device);
  header->set_requires_grad(options.requires_grad);
  header->set_context_id(options.context);
  header->mutable_shared_memory()->set_region(name_);
  header->mutable_shared_memory()->set_offset(offset);
  if (writer->Write(message)) writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return Tensor::Adopt(state_, TensorInfo::FromProto(response.tensor()));
}

absl::Status SharedMemory::GetAt(const Tensor& tensor, uint64_t offset) {
  if (!state_) return internal::NoSession();
  if (absl::Status s = state_->CheckOpen(); !s.ok()) return s;
  absl::StatusOr<uint64_t> handle = internal::HandleIn(*state_, tensor, {});
  if (!handle.ok()) return handle.status();
  grpc::ClientContext context;
  state_->Prepare(&context);
  v1::GetTensorRequest request;
  request.set_session_id(state_->id());
  request.set_handle(*handle);
  request.mutable_shared_memory()->set_region(name_);
  request.mutable_shared_memory()->set_offset(offset);
  std::unique_ptr<grpc::ClientReader<v1::GetTensorResponse>> reader =
      state_->stub().GetTensor(&context, request);
  v1::GetTensorResponse message;
  while (reader->Read(&message)) {
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return absl::OkStatus();
}

absl::StatusOr<HostTensor> SharedMemory::Get(const Tensor& tensor, uint64_t offset) {
  if (absl::Status s = GetAt(tensor, offset); !s.ok()) return s;
  // The server checked that the tensor's bytes fit the region at `offset`.
  const size_t n = static_cast<size_t>(tensor.numel()) * DTypeSize(tensor.dtype());
  std::string bytes;
  internal::ReserveTensorBytes(bytes, n);
  bytes.append(data() + offset, n);
  return HostTensor(tensor.dtype(), tensor.shape(), std::move(bytes));
}

}  // namespace tensord::client
