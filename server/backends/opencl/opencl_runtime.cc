#include "server/backends/opencl/opencl_runtime.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/cleanup/cleanup.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "server/core/status.h"
#include "server/core/stream_scope.h"

namespace tensord::opencl {
namespace {

// Constant buffers cached per device: the geometries and tables of a model's launches. A
// geometry is a few dozen numbers; larger tables (index lists) follow the data and are not
// cached.
constexpr size_t kCachedConstants = 4096;
constexpr size_t kMaxCachedConstants = 512;

// Host transfers of at least kStagedFrom bytes go through a pinned staging buffer of
// kStagingBytes, a chunk at a time; smaller ones are written and read directly.
constexpr size_t kStagedFrom = size_t{64} << 10;
constexpr size_t kStagingBytes = size_t{4} << 20;

// TENSORD_GPU_STAGING=on|off, else `otherwise`.
bool StagingSetting(bool otherwise) {
  const char* v = std::getenv("TENSORD_GPU_STAGING");
  if (v != nullptr && std::string(v) == "on") return true;
  if (v != nullptr && std::string(v) == "off") return false;
  return otherwise;
}

// An OpenCL info string: `query(size, buffer, &size_ret)` asked for its size, then its bytes.
template <typename Query>
std::string InfoString(Query query) {
  size_t size = 0;
  if (query(0, nullptr, &size) != CL_SUCCESS || size == 0) return "";
  std::string s(size, '\0');
  query(size, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string DeviceString(cl_device_id id, cl_device_info what) {
  return InfoString(
      [&](size_t n, void* p, size_t* ret) { return clGetDeviceInfo(id, what, n, p, ret); });
}

std::string PlatformString(cl_platform_id id, cl_platform_info what) {
  return InfoString(
      [&](size_t n, void* p, size_t* ret) { return clGetPlatformInfo(id, what, n, p, ret); });
}

}  // namespace

absl::Status ClError(cl_int err, const std::string& what, const std::string& device) {
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
      err == CL_OUT_OF_HOST_MEMORY || err == CL_INVALID_BUFFER_SIZE) {
    return Error(
        Reason::kOutOfMemory,
        absl::StrCat(device, ": out of device memory (", what, ", OpenCL error ", err, ")"),
        {{"device", device}});
  }
  return Error(Reason::kInternal,
               absl::StrCat(device, ": ", what, " failed (OpenCL error ", err, ")"),
               {{"device", device}});
}

ClDevice::ClDevice(std::string name, cl_platform_id platform, cl_device_id id)
    : name_(std::move(name)),
      platform_(platform),
      id_(id),
      order_([this](uint64_t from, uint64_t to) { return Wait(from, to); }),
      blocks_([this](size_t bytes) { return NewBuffer(bytes); },
              [this](void* block, size_t) {
                order_.Forget(block);
                clReleaseMemObject(static_cast<cl_mem>(block));
              }) {
  description_ = absl::StrCat(DeviceString(id, CL_DEVICE_NAME), ", ",
                              PlatformString(platform, CL_PLATFORM_NAME), ", ",
                              DeviceString(id, CL_DEVICE_VERSION));
  vendor_ = DeviceString(id, CL_DEVICE_VENDOR);
  cl_ulong memory = 0;
  clGetDeviceInfo(id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(memory), &memory, nullptr);
  memory_bytes_ = static_cast<int64_t>(memory);
  if (const size_t limit = gpu::MemoryLimit(); limit > 0) {
    blocks_.set_limit(limit, name_);
    memory_bytes_ = std::min(memory_bytes_, static_cast<int64_t>(limit));
  }
  cl_device_fp_config fp64 = 0;
  clGetDeviceInfo(id, CL_DEVICE_DOUBLE_FP_CONFIG, sizeof(fp64), &fp64, nullptr);
  has_fp64_ = fp64 != 0;
  size_t group = 1;
  clGetDeviceInfo(id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof(group), &group, nullptr);
  max_group_size_ = static_cast<int>(std::min<size_t>(group, 1024));
  cl_device_type type = 0;
  clGetDeviceInfo(id, CL_DEVICE_TYPE, sizeof(type), &type, nullptr);
  cpu_ = (type & CL_DEVICE_TYPE_CPU) != 0;
}

ClDevice::~ClDevice() {
  blocks_.ReleaseAll();
  {
    absl::MutexLock lock(&constants_mu_);
    for (auto& [values, cached] : constants_) clReleaseMemObject(cached.mem);
  }
  for (auto& [key, k] : kernels_) {
    clReleaseKernel(k->kernel);
    clReleaseProgram(k->program);
  }
  {
    absl::MutexLock lock(&staging_mu_);
    if (staging_) clReleaseMemObject(staging_);
  }
  for (cl_command_queue queue : queues_.TakeAll()) clReleaseCommandQueue(queue);
  if (queue_) clReleaseCommandQueue(queue_);
  if (context_) clReleaseContext(context_);
}

absl::Status ClDevice::Open() {
  cl_int err = CL_SUCCESS;
  context_ = clCreateContext(nullptr, 1, &id_, nullptr, nullptr, &err);
  if (err != CL_SUCCESS) return ClError(err, "clCreateContext", name_);
  queue_ = clCreateCommandQueue(context_, id_, 0, &err);
  if (err != CL_SUCCESS) return ClError(err, "clCreateCommandQueue", name_);
  staged_ = StagingSetting(/*otherwise=*/!cpu_);
  std::weak_ptr<gpu::DeviceRuntime> self = weak_from_this();
  OnStreamEnd([self, this](uint64_t stream) {
    if (std::shared_ptr<gpu::DeviceRuntime> alive = self.lock()) EndStream(stream);
  });
  return absl::OkStatus();
}

absl::StatusOr<cl_command_queue> ClDevice::StreamQueue(uint64_t stream) {
  if (stream == kDefaultStream) return queue_;
  return queues_.Get(stream, [this]() -> absl::StatusOr<cl_command_queue> {
    cl_int err = CL_SUCCESS;
    cl_command_queue queue = clCreateCommandQueue(context_, id_, 0, &err);
    if (err != CL_SUCCESS) return ClError(err, "clCreateCommandQueue", name_);
    return queue;
  });
}

absl::StatusOr<cl_command_queue> ClDevice::CurrentQueue() {
  return StreamQueue(StreamScope::Current());
}

size_t ClDevice::stream_queues() const { return queues_.size(); }

absl::StatusOr<cl_command_queue> ClDevice::QueueFor(absl::Span<const void* const> blocks) {
  const uint64_t stream = StreamScope::Current();
  RETURN_IF_ERROR(order_.Use(blocks, stream));
  return StreamQueue(stream);
}

absl::Status ClDevice::Wait(uint64_t from, uint64_t to) {
  cl_command_queue before = queue_;
  // Retained while used: the stream may end (and release its queue) meanwhile.
  if (from != kDefaultStream && !queues_.With(from, [&](cl_command_queue q) {
        before = q;
        clRetainCommandQueue(q);
      })) {
    return absl::OkStatus();  // ended: its work is done
  }
  absl::Cleanup release = [&] {
    if (from != kDefaultStream) clReleaseCommandQueue(before);
  };
  ASSIGN_OR_RETURN(cl_command_queue after, StreamQueue(to));
  cl_event marker = nullptr;
  cl_int err = clEnqueueMarkerWithWaitList(before, 0, nullptr, &marker);
  if (err == CL_SUCCESS) {
    err = clEnqueueBarrierWithWaitList(after, 1, &marker, nullptr);
    clReleaseEvent(marker);
  }
  if (err != CL_SUCCESS) return ClError(err, "ordering two queues", name_);
  // A marker is only submitted once its queue is flushed; the waiting queue may block on it.
  clFlush(before);
  return absl::OkStatus();
}

void ClDevice::EndStream(uint64_t stream) { queues_.End(stream, clFinish, clReleaseCommandQueue); }

absl::StatusOr<void*> ClDevice::NewBuffer(size_t bytes) {
  cl_int err = CL_SUCCESS;
  cl_mem mem = clCreateBuffer(context_, CL_MEM_READ_WRITE, bytes, nullptr, &err);
  if (err != CL_SUCCESS) {
    return ClError(err, absl::StrCat("allocating ", bytes, " bytes"), name_);
  }
  return static_cast<void*>(mem);
}

absl::StatusOr<void*> ClDevice::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  ASSIGN_OR_RETURN(void* block, blocks_.Allocate(bytes));
  absl::Status ordered = order_.Allocated(block, StreamScope::Current());
  if (!ordered.ok()) {
    blocks_.Free(block, bytes);
    return ordered;
  }
  return block;
}

void ClDevice::Free(void* block, size_t bytes) {
  if (block != nullptr) blocks_.Free(block, bytes);
}

absl::StatusOr<gpu::CompiledKernel*> ClDevice::Kernel(
    const std::string& key, const std::string& name,
    const std::function<std::string(const gpu::Dialect&)>& render) {
  absl::MutexLock lock(&mu_);
  auto it = kernels_.find(key);
  if (it != kernels_.end()) return it->second.get();
  const std::string source = render(dialect());
  auto built = std::make_unique<BuiltKernel>();
  const char* text = source.c_str();
  cl_int err = CL_SUCCESS;
  built->program = clCreateProgramWithSource(context_, 1, &text, nullptr, &err);
  if (err != CL_SUCCESS) return ClError(err, "clCreateProgramWithSource", name_);
  // Without fp64, unsuffixed literals (1.0) are float, as the templates' WIDE is.
  const char* options =
      has_fp64() ? "-cl-std=CL1.2" : "-cl-std=CL1.2 -cl-single-precision-constant";
  err = clBuildProgram(built->program, 1, &id_, options, nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t size = 0;
    clGetProgramBuildInfo(built->program, id_, CL_PROGRAM_BUILD_LOG, 0, nullptr, &size);
    std::string log(size, '\0');
    clGetProgramBuildInfo(built->program, id_, CL_PROGRAM_BUILD_LOG, size, log.data(), nullptr);
    clReleaseProgram(built->program);
    return Error(Reason::kInternal,
                 absl::StrCat(name_, ": building kernel ", name, " failed (OpenCL error ", err,
                              "): ", log.substr(0, 2000)),
                 {{"device", name_}});
  }
  built->kernel = clCreateKernel(built->program, name.c_str(), &err);
  if (err != CL_SUCCESS) {
    clReleaseProgram(built->program);
    return ClError(err, absl::StrCat("clCreateKernel ", name), name_);
  }
  built->name = name;
  size_t group = 0;
  if (clGetKernelWorkGroupInfo(built->kernel, id_, CL_KERNEL_WORK_GROUP_SIZE, sizeof(group), &group,
                               nullptr) == CL_SUCCESS) {
    built->max_group_size = static_cast<int>(std::min<size_t>(group, 1 << 30));
  }
  BuiltKernel* out = built.get();
  kernels_.emplace(key, std::move(built));
  return out;
}

int64_t ClDevice::kernels_built() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(kernels_.size());
}

absl::StatusOr<const void*> ClDevice::Constants(const std::vector<int64_t>& values) {
  // A geometry of rank 0 still needs a buffer to pass.
  static const std::vector<int64_t> kRankZero = {0};
  const std::vector<int64_t>& data = values.empty() ? kRankZero : values;
  const bool cacheable = data.size() <= kMaxCachedConstants;
  if (cacheable) {
    absl::MutexLock lock(&constants_mu_);
    auto it = constants_.find(data);
    if (it != constants_.end()) {
      constants_order_.splice(constants_order_.end(), constants_order_, it->second.order);
      ++constant_stats_.hits;
      clRetainMemObject(it->second.mem);
      return static_cast<const void*>(it->second.mem);
    }
  }
  cl_int err = CL_SUCCESS;
  cl_mem mem =
      clCreateBuffer(context_, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                     data.size() * sizeof(int64_t), const_cast<int64_t*>(data.data()), &err);
  if (err != CL_SUCCESS) return ClError(err, "geometry buffer", name_);
  absl::MutexLock lock(&constants_mu_);
  ++constant_stats_.created;
  if (!cacheable || constants_.contains(data)) return static_cast<const void*>(mem);
  clRetainMemObject(mem);  // the cache's reference
  constants_order_.push_back(data);
  constants_.emplace(data, CachedConstants{mem, std::prev(constants_order_.end())});
  while (constants_.size() > kCachedConstants) {
    auto oldest = constants_.find(constants_order_.front());
    clReleaseMemObject(oldest->second.mem);
    constants_.erase(oldest);
    constants_order_.pop_front();
  }
  return static_cast<const void*>(mem);
}

void ClDevice::ReleaseConstants(const void* block) {
  clReleaseMemObject(static_cast<cl_mem>(const_cast<void*>(block)));
}

ClDevice::ConstantStats ClDevice::constant_stats() const {
  absl::MutexLock lock(&constants_mu_);
  return constant_stats_;
}

absl::Status ClDevice::Launch(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args, int64_t n) {
  return Enqueue(kernel, args, n, 0);
}

absl::Status ClDevice::LaunchGroups(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args,
                                    int64_t groups, int size) {
  return Enqueue(kernel, args, groups * size, size);
}

absl::Status ClDevice::Enqueue(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args, int64_t n,
                               int local) {
  if (n <= 0) return absl::OkStatus();
  auto* built = static_cast<BuiltKernel*>(kernel);
  absl::InlinedVector<const void*, 8> blocks;
  for (const gpu::KernelArgs::Arg& a : args.args()) {
    if (a.is_block) blocks.push_back(a.block);
  }
  ASSIGN_OR_RETURN(cl_command_queue queue, QueueFor(blocks));
  // Arguments belong to the kernel object, shared by every caller: set and enqueue as one.
  absl::MutexLock lock(&built->mu);
  cl_uint index = 0;
  for (const gpu::KernelArgs::Arg& a : args.args()) {
    cl_int err = CL_SUCCESS;
    if (a.is_block) {
      cl_mem mem = static_cast<cl_mem>(const_cast<void*>(a.block));
      err = clSetKernelArg(built->kernel, index, sizeof(cl_mem), &mem);
    } else {
      err = clSetKernelArg(built->kernel, index, a.size, &a.bits);
    }
    if (err != CL_SUCCESS) {
      return ClError(err, absl::StrCat("clSetKernelArg ", index, " of ", built->name), name_);
    }
    ++index;
  }
  const size_t global = static_cast<size_t>(n);
  const size_t group = static_cast<size_t>(local);
  cl_int err = clEnqueueNDRangeKernel(queue, built->kernel, 1, nullptr, &global,
                                      local > 0 ? &group : nullptr, 0, nullptr, nullptr);
  if (err != CL_SUCCESS) return ClError(err, "clEnqueueNDRangeKernel " + built->name, name_);
  return absl::OkStatus();
}

absl::Status ClDevice::Write(void* block, size_t offset, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (staged_ && bytes >= kStagedFrom) {
    return StagedWrite(static_cast<cl_mem>(block), offset, static_cast<const char*>(src), bytes);
  }
  ASSIGN_OR_RETURN(cl_command_queue queue, QueueFor({block}));
  cl_int err = clEnqueueWriteBuffer(queue, static_cast<cl_mem>(block), CL_TRUE, offset, bytes, src,
                                    0, nullptr, nullptr);
  return err == CL_SUCCESS ? absl::OkStatus() : ClError(err, "writing to the device", name_);
}

absl::Status ClDevice::Read(const void* block, size_t offset, void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (staged_ && bytes >= kStagedFrom) {
    return StagedRead(static_cast<cl_mem>(const_cast<void*>(block)), offset,
                      static_cast<char*>(dst), bytes);
  }
  ASSIGN_OR_RETURN(cl_command_queue queue, QueueFor({block}));
  cl_int err = clEnqueueReadBuffer(queue, static_cast<cl_mem>(const_cast<void*>(block)), CL_TRUE,
                                   offset, bytes, dst, 0, nullptr, nullptr);
  return err == CL_SUCCESS ? absl::OkStatus() : ClError(err, "reading from the device", name_);
}

absl::Status ClDevice::EnsureStaging() {
  if (staging_ != nullptr) return absl::OkStatus();
  cl_int err = CL_SUCCESS;
  staging_ = clCreateBuffer(context_, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, kStagingBytes,
                            nullptr, &err);
  if (err == CL_SUCCESS) return order_.Allocated(staging_, StreamScope::Current());
  staging_ = nullptr;
  return ClError(err, "allocating the staging buffer", name_);
}

// The queue is in order: mapping the staging buffer waits for the copy that last read or wrote
// it, so one buffer serves every chunk, and a Write returns once its last chunk is staged (the
// copy out of it runs before anything enqueued later). A stream that takes the buffer over
// from another waits for that stream's copies first.
absl::Status ClDevice::StagedWrite(cl_mem block, size_t offset, const char* src, size_t bytes) {
  absl::MutexLock lock(&staging_mu_);
  RETURN_IF_ERROR(EnsureStaging());
  ASSIGN_OR_RETURN(cl_command_queue queue, QueueFor({staging_, block}));
  cl_int err = CL_SUCCESS;
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    void* p = clEnqueueMapBuffer(queue, staging_, CL_TRUE, CL_MAP_WRITE_INVALIDATE_REGION, 0, n, 0,
                                 nullptr, nullptr, &err);
    if (err != CL_SUCCESS) return ClError(err, "mapping the staging buffer", name_);
    std::memcpy(p, src + done, n);
    err = clEnqueueUnmapMemObject(queue, staging_, p, 0, nullptr, nullptr);
    if (err == CL_SUCCESS) {
      err = clEnqueueCopyBuffer(queue, staging_, block, 0, offset + done, n, 0, nullptr, nullptr);
    }
    if (err != CL_SUCCESS) return ClError(err, "writing to the device", name_);
    done += n;
  }
  return absl::OkStatus();
}

absl::Status ClDevice::StagedRead(cl_mem block, size_t offset, char* dst, size_t bytes) {
  absl::MutexLock lock(&staging_mu_);
  RETURN_IF_ERROR(EnsureStaging());
  ASSIGN_OR_RETURN(cl_command_queue queue, QueueFor({staging_, block}));
  cl_int err = CL_SUCCESS;
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(kStagingBytes, bytes - done);
    err = clEnqueueCopyBuffer(queue, block, staging_, offset + done, 0, n, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) return ClError(err, "reading from the device", name_);
    void* p =
        clEnqueueMapBuffer(queue, staging_, CL_TRUE, CL_MAP_READ, 0, n, 0, nullptr, nullptr, &err);
    if (err != CL_SUCCESS) return ClError(err, "mapping the staging buffer", name_);
    std::memcpy(dst + done, p, n);
    err = clEnqueueUnmapMemObject(queue, staging_, p, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) return ClError(err, "reading from the device", name_);
    done += n;
  }
  return absl::OkStatus();
}

absl::Status ClDevice::CopyOnDevice(const void* src, void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  ASSIGN_OR_RETURN(cl_command_queue queue, QueueFor({src, dst}));
  cl_int err = clEnqueueCopyBuffer(queue, static_cast<cl_mem>(const_cast<void*>(src)),
                                   static_cast<cl_mem>(dst), 0, 0, bytes, 0, nullptr, nullptr);
  return err == CL_SUCCESS ? absl::OkStatus() : ClError(err, "copying on the device", name_);
}

absl::Status ClDevice::Synchronize() {
  std::vector<cl_command_queue> queues = {queue_};
  queues_.ForEach([&](cl_command_queue queue) {
    clRetainCommandQueue(queue);
    queues.push_back(queue);
  });
  cl_int err = CL_SUCCESS;
  for (size_t i = 0; i < queues.size(); ++i) {
    const cl_int finished = clFinish(queues[i]);
    if (err == CL_SUCCESS) err = finished;
    if (i > 0) clReleaseCommandQueue(queues[i]);
  }
  return err == CL_SUCCESS ? absl::OkStatus() : ClError(err, "clFinish", name_);
}

const std::vector<std::shared_ptr<ClDevice>>& Devices() {
  static const auto* devices = [] {
    auto* out = new std::vector<std::shared_ptr<ClDevice>>();
    cl_uint num_platforms = 0;
    if (clGetPlatformIDs(0, nullptr, &num_platforms) != CL_SUCCESS || num_platforms == 0) {
      return out;
    }
    std::vector<cl_platform_id> platforms(num_platforms);
    clGetPlatformIDs(num_platforms, platforms.data(), nullptr);
    for (cl_platform_id p : platforms) {
      cl_uint n = 0;
      if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &n) != CL_SUCCESS || n == 0) continue;
      std::vector<cl_device_id> ids(n);
      clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, n, ids.data(), nullptr);
      for (cl_device_id id : ids) {
        auto device = std::make_shared<ClDevice>(absl::StrCat("opencl:", out->size()), p, id);
        if (device->Open().ok()) out->push_back(std::move(device));
      }
    }
    return out;
  }();
  return *devices;
}

}  // namespace tensord::opencl
