#include "tests/gpu/nvrtc_cross_compile.h"

#include <nvrtc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "server/backends/cuda/cuda_dialect.h"
#include "server/core/status.h"

namespace tensord::testing {
namespace {

std::atomic<int64_t> compiled{0};
std::atomic<int64_t> known{0};

// Sources NVRTC compiled before, in this run or another test binary's: a file per source,
// named by its hash, in TENSORD_TEST_NVRTC_CACHE (default: a folder of the temp dir).
std::string VerdictPath(const std::string& source) {
  static const std::string dir = [] {
    const char* env = std::getenv("TENSORD_TEST_NVRTC_CACHE");
    std::string d = env != nullptr ? env : std::string("/tmp/tensord-nvrtc-verdicts");
    std::filesystem::create_directories(d);
    return d;
  }();
  return absl::StrCat(dir, "/", absl::Hex(std::hash<std::string>{}(source)), "-", source.size(),
                      ".ok");
}

// NVRTC's verdict on `source`: OK, or INTERNAL with its log.
absl::Status Compile(const std::string& name, const std::string& source) {
  const std::string verdict = VerdictPath(source);
  if (std::filesystem::exists(verdict)) {
    ++known;
    return absl::OkStatus();
  }
  nvrtcProgram program = nullptr;
  nvrtcResult r =
      nvrtcCreateProgram(&program, source.c_str(), (name + ".cu").c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    return Error(Reason::kInternal, absl::StrCat("nvrtcCreateProgram: ", nvrtcGetErrorString(r)));
  }
  std::vector<std::string> options = cuda::NvrtcOptions("90");
  std::vector<const char*> argv;
  for (const std::string& o : options) argv.push_back(o.c_str());
  r = nvrtcCompileProgram(program, static_cast<int>(argv.size()), argv.data());
  std::string log;
  size_t size = 0;
  nvrtcGetProgramLogSize(program, &size);
  log.resize(size);
  if (size > 0) nvrtcGetProgramLog(program, log.data());
  nvrtcDestroyProgram(&program);
  if (r != NVRTC_SUCCESS) {
    return Error(Reason::kInternal,
                 absl::StrCat("NVRTC (CUDA dialect, sm_90) cannot compile kernel ", name, ": ",
                              log.substr(0, 3000), "\nsource:\n", source.substr(0, 6000)));
  }
  ++compiled;
  std::ofstream(verdict) << name << "\n";
  return absl::OkStatus();
}

class CrossCompilingRuntime : public gpu::DeviceRuntime {
 public:
  explicit CrossCompilingRuntime(std::shared_ptr<gpu::DeviceRuntime> inner)
      : inner_(std::move(inner)) {}

  const std::string& name() const override { return inner_->name(); }
  bool native_fp64() const override { return inner_->native_fp64(); }
  const gpu::Dialect& dialect() const override { return inner_->dialect(); }
  absl::StatusOr<gpu::CompiledKernel*> Kernel(
      const std::string& key, const std::string& name,
      const std::function<std::string(const gpu::Dialect&)>& render) override {
    {
      absl::MutexLock lock(&mu_);
      auto it = checked_.find(key);
      if (it == checked_.end()) {
        // In the CUDA dialect with the wide type the device's kernels have.
        const gpu::Dialect& dialect = has_fp64() ? cuda::Dialect() : cuda::DialectWithoutFp64();
        it = checked_.emplace(key, Compile(name, render(dialect))).first;
      }
      RETURN_IF_ERROR(it->second);
    }
    return inner_->Kernel(key, name, render);
  }
  absl::Status Launch(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args,
                      int64_t n) override {
    return inner_->Launch(kernel, args, n);
  }
  absl::Status LaunchGroups(gpu::CompiledKernel* kernel, const gpu::KernelArgs& args,
                            int64_t groups, int size) override {
    return inner_->LaunchGroups(kernel, args, groups, size);
  }
  int max_group_size() const override { return inner_->max_group_size(); }
  bool runs_on_host_cores() const override { return inner_->runs_on_host_cores(); }
  absl::Status Write(void* block, size_t offset, const void* src, size_t bytes) override {
    return inner_->Write(block, offset, src, bytes);
  }
  absl::Status Read(const void* block, size_t offset, void* dst, size_t bytes) override {
    return inner_->Read(block, offset, dst, bytes);
  }
  absl::Status CopyOnDevice(const void* src, void* dst, size_t bytes) override {
    return inner_->CopyOnDevice(src, dst, bytes);
  }
  absl::StatusOr<const void*> Constants(const std::vector<int64_t>& values) override {
    return inner_->Constants(values);
  }
  void ReleaseConstants(const void* block) override { inner_->ReleaseConstants(block); }
  bool GemmTakes(DType dtype) const override { return inner_->GemmTakes(dtype); }
  bool GemmAddsBias() const override { return inner_->GemmAddsBias(); }
  absl::Status Gemm(const gpu::GemmShape& shape, const void* a, const void* b, void* c,
                    const void* bias) override {
    return inner_->Gemm(shape, a, b, c, bias);
  }
  absl::StatusOr<std::optional<size_t>> ConvolutionWorkspace(const gpu::ConvolutionShape& shape,
                                                             size_t max_workspace) override {
    return inner_->ConvolutionWorkspace(shape, max_workspace);
  }
  absl::Status Convolution(const gpu::ConvolutionShape& shape, const void* a, const void* b,
                           void* out, void* workspace, size_t workspace_bytes) override {
    return inner_->Convolution(shape, a, b, out, workspace, workspace_bytes);
  }
  absl::Status Synchronize() override { return inner_->Synchronize(); }
  absl::StatusOr<void*> Allocate(size_t bytes) override { return inner_->Allocate(bytes); }
  void Free(void* block, size_t bytes) override { inner_->Free(block, bytes); }

 private:
  std::shared_ptr<gpu::DeviceRuntime> inner_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, absl::Status> checked_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

bool NvrtcCrossCompileRequested() {
  const char* v = std::getenv("TENSORD_TEST_NVRTC");
  return v != nullptr && std::string(v) == "1";
}

std::shared_ptr<gpu::DeviceRuntime> CrossCompiling(std::shared_ptr<gpu::DeviceRuntime> inner) {
  static const bool report = [] {
    std::atexit([] {
      std::fprintf(stderr,
                   "nvrtc: %lld kernels compiled in the CUDA dialect for sm_90, %lld compiled "
                   "before\n",
                   static_cast<long long>(compiled.load()), static_cast<long long>(known.load()));
    });
    return true;
  }();
  (void)report;
  return std::make_shared<CrossCompilingRuntime>(std::move(inner));
}

}  // namespace tensord::testing
