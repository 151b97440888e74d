#include "server/backends/cuda/cuda_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "server/backends/cuda/cuda_dialect.h"
#include "server/backends/cuda/cuda_libraries.h"
#include "server/backends/cuda/nccl_collectives.h"
#include "server/core/status.h"
#include "server/core/stream_scope.h"

namespace tensord::cuda {
namespace {

constexpr size_t kCachedConstants = 4096;
constexpr size_t kMaxCachedConstants = 512;
constexpr unsigned kBlock = 256;  // threads per block of a plain launch

// Errors after which the context cannot be used again.
bool Sticky(cudaError_t err) {
  return err == cudaErrorIllegalAddress || err == cudaErrorLaunchFailure ||
         err == cudaErrorIllegalInstruction || err == cudaErrorMisalignedAddress ||
         err == cudaErrorInvalidAddressSpace || err == cudaErrorInvalidPc ||
         err == cudaErrorHardwareStackError || err == cudaErrorAssert ||
         err == cudaErrorLaunchTimeout || err == cudaErrorECCUncorrectable;
}

// $TENSORD_CUDA_CACHE_DIR, else $XDG_CACHE_HOME/tensord/cuda or ~/.cache/tensord/cuda; "" when
// none can be made (no disk cache then).
std::string CacheDir() {
  static const std::string* dir = [] {
    std::string d;
    if (const char* env = std::getenv("TENSORD_CUDA_CACHE_DIR")) {
      d = env;
    } else if (const char* xdg = std::getenv("XDG_CACHE_HOME")) {
      d = absl::StrCat(xdg, "/tensord/cuda");
    } else if (const char* home = std::getenv("HOME")) {
      d = absl::StrCat(home, "/.cache/tensord/cuda");
    }
    std::error_code ec;
    if (!d.empty()) std::filesystem::create_directories(d, ec);
    return new std::string(ec ? "" : d);
  }();
  return *dir;
}

}  // namespace

absl::Status CudaError(cudaError_t err, const std::string& what, const std::string& device) {
  if (err == cudaErrorMemoryAllocation) {
    return Error(Reason::kOutOfMemory, absl::StrCat(device, ": out of device memory (", what, ")"),
                 {{"device", device}});
  }
  return Error(Reason::kInternal,
               absl::StrCat(device, ": ", what, " failed (", cudaGetErrorName(err), ": ",
                            cudaGetErrorString(err), ")"),
               {{"device", device}});
}

CudaDevice::CudaDevice(std::string name, int ordinal)
    : name_(std::move(name)),
      ordinal_(ordinal),
      order_([this](uint64_t from, uint64_t to) { return Wait(from, to); }),
      blocks_(
          [this](size_t bytes) -> absl::StatusOr<void*> {
            void* p = nullptr;
            RETURN_IF_ERROR(Enter());
            // A failure clears itself unless it is sticky (an earlier kernel's fault that
            // surfaces here), which takes the device out of service.
            RETURN_IF_ERROR(
                Check(cudaMalloc(&p, bytes), absl::StrCat("allocating ", bytes, " bytes")));
            return p;
          },
          [this](void* block, size_t) {
            order_.Forget(block);
            cudaSetDevice(ordinal_);
            // cudaFree "may" synchronize: the work that uses the block finishes first, for sure.
            cudaDeviceSynchronize();
            cudaFree(block);
          }) {
  if (const size_t limit = gpu::MemoryLimit(); limit > 0) blocks_.set_limit(limit, name_);
}

CudaDevice::~CudaDevice() {
  cudaSetDevice(ordinal_);
  cudaDeviceSynchronize();
  for (cudaStream_t stream : streams_.TakeAll()) cudaStreamDestroy(stream);
  blocks_.ReleaseAll();
  {
    absl::MutexLock lock(&constants_mu_);
    for (auto& [values, c] : constants_) cudaFree(c.block);
  }
  for (auto& [key, k] : kernels_) cudaLibraryUnload(k->library);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

const gpu::Dialect& CudaDevice::dialect() const {
  return has_fp64() ? cuda::Dialect() : cuda::DialectWithoutFp64();
}

absl::Status CudaDevice::Open() {
  cudaDeviceProp p;
  cudaError_t err = cudaGetDeviceProperties(&p, ordinal_);
  if (err != cudaSuccess) return CudaError(err, "cudaGetDeviceProperties", name_);
  arch_ = absl::StrCat(p.major, p.minor);
  memory_bytes_ = static_cast<int64_t>(p.totalGlobalMem);
  if (const size_t limit = gpu::MemoryLimit(); limit > 0) {
    memory_bytes_ = std::min(memory_bytes_, static_cast<int64_t>(limit));
  }
  description_ = absl::StrCat(p.name, ", compute capability ", p.major, ".", p.minor, ", ",
                              p.multiProcessorCount, " SMs");
  err = cudaSetDevice(ordinal_);
  if (err != cudaSuccess) return CudaError(err, "cudaSetDevice", name_);
  err = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
  if (err != cudaSuccess) return CudaError(err, "cudaStreamCreate", name_);
  std::weak_ptr<gpu::DeviceRuntime> self = weak_from_this();
  OnStreamEnd([self, this](uint64_t stream) {
    if (std::shared_ptr<gpu::DeviceRuntime> alive = self.lock()) EndStream(stream);
  });
  return absl::OkStatus();
}

absl::StatusOr<cudaStream_t> CudaDevice::StreamOf(uint64_t stream) {
  if (stream == kDefaultStream) return stream_;
  return streams_.Get(stream, [this]() -> absl::StatusOr<cudaStream_t> {
    cudaStream_t made = nullptr;
    RETURN_IF_ERROR(Check(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking),
                          "cudaStreamCreate for a session"));
    return made;
  });
}

absl::StatusOr<cudaStream_t> CudaDevice::CurrentStream() {
  RETURN_IF_ERROR(Enter());
  return StreamOf(StreamScope::Current());
}

size_t CudaDevice::stream_count() const { return streams_.size(); }

absl::StatusOr<cudaStream_t> CudaDevice::StreamAfter(absl::Span<const void* const> blocks) {
  RETURN_IF_ERROR(Enter());
  return StreamFor(blocks);
}

DeviceCollectives* CudaDevice::collectives() {
  absl::call_once(collectives_once_, [this] { collectives_ = MakeNcclCollectives(*this); });
  return collectives_.get();
}

CudnnConvolutions* CudaDevice::cudnn() {
  absl::call_once(cudnn_once_, [this] { cudnn_ = MakeCudnnConvolutions(*this); });
  return cudnn_.get();
}

absl::StatusOr<std::optional<size_t>> CudaDevice::ConvolutionWorkspace(
    const gpu::ConvolutionShape& shape, size_t max_workspace) {
  CudnnConvolutions* library = cudnn();
  if (library == nullptr) return std::nullopt;
  return library->Workspace(shape, max_workspace);
}

absl::Status CudaDevice::Convolution(const gpu::ConvolutionShape& shape, const void* a,
                                     const void* b, void* out, void* workspace,
                                     size_t workspace_bytes) {
  CudnnConvolutions* library = cudnn();
  if (library == nullptr) return gpu::DeviceRuntime::Convolution(shape, a, b, out, workspace, 0);
  return library->Run(shape, a, b, out, workspace, workspace_bytes);
}

absl::StatusOr<cudaStream_t> CudaDevice::StreamFor(absl::Span<const void* const> blocks) {
  const uint64_t stream = StreamScope::Current();
  RETURN_IF_ERROR(order_.Use(blocks, stream));
  return StreamOf(stream);
}

absl::Status CudaDevice::Wait(uint64_t from, uint64_t to) {
  RETURN_IF_ERROR(Enter());
  ASSIGN_OR_RETURN(cudaStream_t after, StreamOf(to));
  cudaEvent_t event = nullptr;
  RETURN_IF_ERROR(Check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming),
                        "cudaEventCreate ordering two streams"));
  // Recorded while the stream cannot end (and be destroyed).
  cudaError_t err = cudaSuccess;
  if (from == kDefaultStream) {
    err = cudaEventRecord(event, stream_);
  } else if (!streams_.With(from,
                            [&](cudaStream_t before) { err = cudaEventRecord(event, before); })) {
    cudaEventDestroy(event);  // ended: its work is done
    return absl::OkStatus();
  }
  if (err == cudaSuccess) err = cudaStreamWaitEvent(after, event, 0);
  cudaEventDestroy(event);  // released once the wait is done
  return Check(err, "ordering two streams");
}

void CudaDevice::EndStream(uint64_t stream) {
  cudaSetDevice(ordinal_);
  streams_.End(stream, cudaStreamSynchronize, cudaStreamDestroy);
}

absl::Status CudaDevice::Enter() {
  {
    absl::MutexLock lock(&mu_);
    if (broken_) {
      return Error(Reason::kInternal, absl::StrCat(name_, " is out of service after ", broken_by_),
                   {{"device", name_}});
    }
  }
  cudaError_t err = cudaSetDevice(ordinal_);
  return err == cudaSuccess ? absl::OkStatus() : CudaError(err, "cudaSetDevice", name_);
}

absl::Status CudaDevice::Check(cudaError_t err, const std::string& what) {
  if (err == cudaSuccess) return absl::OkStatus();
  if (Sticky(err)) {
    absl::MutexLock lock(&mu_);
    broken_ = true;
    broken_by_ = absl::StrCat(what, ": ", cudaGetErrorName(err));
  } else {
    cudaGetLastError();
  }
  return CudaError(err, what, name_);
}

absl::StatusOr<void*> CudaDevice::Allocate(size_t bytes) {
  if (bytes == 0) return nullptr;
  RETURN_IF_ERROR(Enter());
  ASSIGN_OR_RETURN(void* block, blocks_.Allocate(bytes));
  absl::Status ordered = order_.Allocated(block, StreamScope::Current());
  if (!ordered.ok()) {
    blocks_.Free(block, bytes);
    return ordered;
  }
  return block;
}

void CudaDevice::Free(void* block, size_t bytes) {
  if (block != nullptr) blocks_.Free(block, bytes);
}

absl::StatusOr<std::string> CudaDevice::Cubin(const std::string& name, const std::string& source,
                                              bool fresh) {
  ASSIGN_OR_RETURN(const Nvrtc* nvrtc, LoadNvrtc());
  const std::vector<std::string> options = NvrtcOptions(arch_);
  std::string key = source;
  for (const std::string& o : options) absl::StrAppend(&key, "\n", o);
  absl::StrAppend(&key, "\nnvrtc ", nvrtc->major, ".", nvrtc->minor, " sm_", arch_);
  const std::string dir = CacheDir();
  const std::string path =
      dir.empty() ? ""
                  : absl::StrCat(dir, "/", name, "-", absl::Hex(std::hash<std::string>{}(key)),
                                 "-sm", arch_, ".cubin");
  if (!path.empty() && !fresh) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::stringstream bytes;
      bytes << in.rdbuf();
      if (!bytes.str().empty()) return bytes.str();
    }
  }
  nvrtcProgram program = nullptr;
  nvrtcResult r =
      nvrtc->CreateProgram(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    return Error(Reason::kInternal,
                 absl::StrCat(name_, ": nvrtcCreateProgram: ", nvrtc->GetErrorString(r)));
  }
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  r = nvrtc->CompileProgram(program, static_cast<int>(argv.size()), argv.data());
  if (r != NVRTC_SUCCESS) {
    size_t size = 0;
    nvrtc->GetProgramLogSize(program, &size);
    std::string log(size, '\0');
    if (size > 0) nvrtc->GetProgramLog(program, log.data());
    nvrtc->DestroyProgram(&program);
    return Error(Reason::kInternal,
                 absl::StrCat(name_, ": building kernel ", name, " failed: ", log.substr(0, 2000)),
                 {{"device", name_}});
  }
  size_t size = 0;
  nvrtc->GetCUBINSize(program, &size);
  std::string cubin(size, '\0');
  nvrtc->GetCUBIN(program, cubin.data());
  nvrtc->DestroyProgram(&program);
  if (!path.empty()) {
    // Written aside and renamed: a concurrent reader sees the whole file or none.
    const std::string tmp =
        absl::StrCat(path, ".", getpid(), ".",
                     absl::Hex(std::hash<std::thread::id>{}(std::this_thread::get_id())));
    std::ofstream(tmp, std::ios::binary) << cubin;
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
  }
  return cubin;
}

absl::StatusOr<gpu::CompiledKernel*> CudaDevice::Kernel(
    const std::string& key, const std::string& name,
    const std::function<std::string(const gpu::Dialect&)>& render) {
  RETURN_IF_ERROR(Enter());
  {
    absl::MutexLock lock(&mu_);
    auto it = kernels_.find(key);
    if (it != kernels_.end()) return it->second.get();
  }
  // Compiled without the device's lock, so that the other streams' work goes on meanwhile
  // (NVRTC takes hundreds of milliseconds a kernel); two threads that need the same kernel at
  // once may both build it, and the first one kept is used.
  const std::string source = render(dialect());
  ASSIGN_OR_RETURN(std::string cubin, Cubin(name, source, /*fresh=*/false));
  auto k = std::make_unique<CudaKernel>();
  k->name = name;
  cudaError_t err =
      cudaLibraryLoadData(&k->library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (err != cudaSuccess && !Sticky(err)) {
    // A cubin from the disk cache may be damaged: built again, and the file replaced.
    cudaGetLastError();
    ASSIGN_OR_RETURN(cubin, Cubin(name, source, /*fresh=*/true));
    err = cudaLibraryLoadData(&k->library, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  }
  RETURN_IF_ERROR(Check(err, "cudaLibraryLoadData " + name));
  err = cudaLibraryGetKernel(&k->kernel, k->library, name.c_str());
  if (err != cudaSuccess) {
    cudaLibraryUnload(k->library);
    return Check(err, "cudaLibraryGetKernel " + name);
  }
  cudaFuncAttributes attributes{};
  if (cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(k->kernel)) == cudaSuccess) {
    k->max_group_size = attributes.maxThreadsPerBlock;
  } else {
    cudaGetLastError();  // not left for a later check to find
  }
  absl::MutexLock lock(&mu_);
  auto [it, added] = kernels_.try_emplace(key, std::move(k));
  if (!added) cudaLibraryUnload(k->library);  // another thread's is kept (k was not moved)
  return it->second.get();
}

absl::Status CudaDevice::Enqueue(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args,
                                 unsigned grid, unsigned block) {
  RETURN_IF_ERROR(Enter());
  auto* k = static_cast<CudaKernel*>(kernel);
  // Each parameter points at its value: a block's device pointer, or a scalar's bytes.
  std::vector<uint64_t> values;
  values.reserve(args.args().size());
  absl::InlinedVector<const void*, 8> blocks;
  for (const gpu::KernelArgs::Arg& a : args.args()) {
    values.push_back(a.is_block ? reinterpret_cast<uint64_t>(a.block) : a.bits);
    if (a.is_block) blocks.push_back(a.block);
  }
  ASSIGN_OR_RETURN(cudaStream_t stream, StreamFor(blocks));
  std::vector<void*> params;
  params.reserve(values.size());
  for (uint64_t& v : values) params.push_back(&v);
  return Check(cudaLaunchKernel(reinterpret_cast<const void*>(k->kernel), dim3(grid), dim3(block),
                                params.data(), 0, stream),
               "launching " + k->name);
}

absl::Status CudaDevice::Launch(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args,
                                int64_t n) {
  if (n <= 0) return absl::OkStatus();
  return Enqueue(kernel, args, static_cast<unsigned>((n + kBlock - 1) / kBlock), kBlock);
}

absl::Status CudaDevice::LaunchGroups(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args,
                                      int64_t groups, int size) {
  if (groups <= 0) return absl::OkStatus();
  return Enqueue(kernel, args, static_cast<unsigned>(groups), static_cast<unsigned>(size));
}

absl::Status CudaDevice::Write(void* block, size_t offset, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Enter());
  ASSIGN_OR_RETURN(cudaStream_t stream, StreamFor({block}));
  RETURN_IF_ERROR(Check(cudaMemcpyAsync(static_cast<char*>(block) + offset, src, bytes,
                                        cudaMemcpyHostToDevice, stream),
                        "writing to the device"));
  // The host bytes may go when this returns.
  return Check(cudaStreamSynchronize(stream), "writing to the device");
}

absl::Status CudaDevice::Read(const void* block, size_t offset, void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Enter());
  ASSIGN_OR_RETURN(cudaStream_t stream, StreamFor({block}));
  RETURN_IF_ERROR(Check(cudaMemcpyAsync(dst, static_cast<const char*>(block) + offset, bytes,
                                        cudaMemcpyDeviceToHost, stream),
                        "reading from the device"));
  return Check(cudaStreamSynchronize(stream), "reading from the device");
}

absl::Status CudaDevice::CopyOnDevice(const void* src, void* dst, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  RETURN_IF_ERROR(Enter());
  ASSIGN_OR_RETURN(cudaStream_t stream, StreamFor({src, dst}));
  return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream),
               "copying on the device");
}

absl::StatusOr<const void*> CudaDevice::Constants(const std::vector<int64_t>& values) {
  static const std::vector<int64_t> kRankZero = {0};
  const std::vector<int64_t>& data = values.empty() ? kRankZero : values;
  {
    absl::MutexLock lock(&constants_mu_);
    auto it = constants_.find(data);
    if (it != constants_.end()) {
      ++it->second.refs;
      return static_cast<const void*>(it->second.block);
    }
  }
  RETURN_IF_ERROR(Enter());
  const size_t bytes = data.size() * sizeof(int64_t);
  void* block = nullptr;
  RETURN_IF_ERROR(Check(cudaMalloc(&block, bytes), "a constant block"));
  // Not tracked by the stream order (device_stream_order.h): written once here, synchronized,
  // and only read after, so any stream reads it without waiting for the others. Freeing it
  // waits for the work that reads it (ReleaseConstants).
  absl::Status written = Write(block, 0, data.data(), bytes);
  if (!written.ok()) {
    cudaFree(block);
    return written;
  }
  absl::MutexLock lock(&constants_mu_);
  auto [it, added] = constants_.try_emplace(data, Constant{block, 0});
  if (!added) {  // another thread made the same block meanwhile (and wrote it: synchronized)
    cudaFree(block);
    block = it->second.block;
  } else {
    constant_keys_[block] = data;
  }
  ++it->second.refs;
  return static_cast<const void*>(block);
}

void CudaDevice::ReleaseConstants(const void* block) {
  absl::MutexLock lock(&constants_mu_);
  auto key = constant_keys_.find(block);
  if (key == constant_keys_.end()) return;
  auto it = constants_.find(key->second);
  if (--it->second.refs > 0) return;
  // Unused: kept while the cache is small and the block is, else freed in stream order.
  if (constants_.size() <= kCachedConstants && key->second.size() <= kMaxCachedConstants) return;
  cudaSetDevice(ordinal_);
  cudaDeviceSynchronize();  // the work that reads it finishes first (cudaFree "may" wait)
  cudaFree(it->second.block);
  constants_.erase(it);
  constant_keys_.erase(key);
}

absl::Status CudaDevice::Synchronize() {
  RETURN_IF_ERROR(Enter());
  return Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

const std::vector<std::shared_ptr<CudaDevice>>& Devices() {
  static const auto* devices = [] {
    auto* out = new std::vector<std::shared_ptr<CudaDevice>>();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // no driver or no GPU: no device
      return out;
    }
    for (int i = 0; i < n; ++i) {
      auto device = std::make_shared<CudaDevice>(absl::StrCat("cuda:", out->size()), i);
      if (device->Open().ok()) out->push_back(std::move(device));
    }
    return out;
  }();
  return *devices;
}

}  // namespace tensord::cuda
