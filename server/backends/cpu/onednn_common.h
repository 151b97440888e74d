// oneDNN plumbing for the CPU kernels: one engine per process, one stream per thread, a bounded
// cache of primitives keyed by (op, shapes, attributes), memory objects that wrap tensor buffers
// without copying, and the conversion of dnnl::error into absl::Status at the kernel boundary.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "dnnl.hpp"
#include "server/backends/cpu/kernel_table.h"
#include "server/backends/cpu/parallel_regions.h"
#include "server/core/status.h"
#include "server/core/tensor.h"

namespace tensord::cpu::onednn {

// Below this many elements a pointwise op, softmax or binary op goes to the loop kernels: oneDNN
// runs every call as an OpenMP parallel region, whose fork/join (and, on a busy machine, the
// wait for a second core) costs more than a single-threaded loop over a small tensor.
inline constexpr int64_t kMinElementwiseSize = 16384;

dnnl::engine& Engine();
// The calling thread's stream: primitives may run concurrently from several server threads.
dnnl::stream& Stream();

// Attributes every cached primitive is created with: a caller-provided scratchpad. oneDNN's
// library-managed scratchpad is shared between primitives and ties each primitive to the thread
// that created it; with our own per-thread scratchpad any server thread can run any primitive.
const dnnl::primitive_attr& Attr();

struct CachedPrimitive {
  dnnl::primitive primitive;
  dnnl::primitive_desc_base pd;  // for layout and workspace queries
  // oneDNN fell back to its reference implementation: slower than the loop kernels.
  bool reference = false;
  // The threads it was built for and runs on (PrimitiveThreads; 0: the caller's team).
  int threads = 0;
};

// The threads a primitive's work is worth (parallel_regions.h), at most the calling thread's
// team (onednn_primitive_threads.cc). GetCachedPrimitive builds a primitive worth fewer again
// for that many, and Execute runs it on them.
int PrimitiveThreads(const dnnl::primitive_desc_base& pd);

struct CacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t size = 0;
  int64_t capacity = 0;
};

// Returns the primitive cached under `key`, building it with `make` on a miss. `make` may throw
// dnnl::error (unsupported shapes); nothing is cached then. Least recently used entries are
// evicted beyond the capacity.
std::shared_ptr<const CachedPrimitive> GetCachedPrimitive(
    const std::string& key, const std::function<CachedPrimitive()>& make);
// What kernels call: GetCachedPrimitive of the key `key` builds, except inside a planned call's
// memo (onednn_call_memo.h), where the primitive this site got at this point of the call's last
// run comes back without a key, when `fits` (given where one site can look up several
// primitives, such as a reorder's) accepts it. `site`: a string literal of the call site's own.
std::shared_ptr<const CachedPrimitive> GetPrimitive(
    const char* site, absl::FunctionRef<std::string()> key,
    const std::function<CachedPrimitive()>& make,
    absl::FunctionRef<bool(const CachedPrimitive&)> fits);
std::shared_ptr<const CachedPrimitive> GetPrimitive(const char* site,
                                                    absl::FunctionRef<std::string()> key,
                                                    const std::function<CachedPrimitive()>& make);
// A key of a kernel's own caches (workspaces), built by `key`, memoised as GetPrimitive's are.
std::string MemoKey(const char* site, absl::FunctionRef<std::string()> key);
CacheStats GetCacheStats();
// A primitive's arguments, by DNNL_ARG_* slot.
using Args = std::unordered_map<int, dnnl::memory>;
// Runs `p` on the calling thread's stream with `args` and a scratchpad of pooled host memory,
// and waits.
void Execute(const CachedPrimitive& p, Args args);

// A buffer oneDNN computes in (a reorder target, a workspace, a scratchpad) in pooled host
// memory (server/core/host_memory.h), given back for reuse when destroyed. A step that runs the
// same shapes again touches the same pages: memory oneDNN allocates itself comes fresh from the
// system on every call, a page fault per 4 KiB. Throws std::bad_alloc when there is no memory
// (the backend turns it into OUT_OF_MEMORY).
class PooledMemory {
 public:
  explicit PooledMemory(const dnnl::memory::desc& md);
  ~PooledMemory();
  PooledMemory(const PooledMemory&) = delete;
  PooledMemory& operator=(const PooledMemory&) = delete;

  const dnnl::memory& get() const { return memory_; }
  size_t bytes() const { return bytes_; }

 private:
  dnnl::memory memory_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};
void ClearCache();
// Enough for the distinct shapes of a few models; a primitive holds JIT code (tens of KiB)
// and its descriptors, so the capacity bounds the cache's memory.
inline constexpr size_t kDefaultCacheCapacity = 1024;
// The most primitives kept (least recently used evicted first); 0 caches nothing.
void SetCacheCapacity(size_t capacity);

// Wraps `t`'s buffer (no copy). oneDNN takes a non-const pointer even for read-only inputs.
inline dnnl::memory Wrap(const Tensor& t, const dnnl::memory::desc& md) {
  return dnnl::memory(md, Engine(), const_cast<void*>(t.raw()));
}
inline dnnl::memory WrapPtr(const void* p, const dnnl::memory::desc& md) {
  return dnnl::memory(md, Engine(), const_cast<void*>(p));
}

dnnl::memory::data_type DataType(DType d);
// Dims of `shape`, with a 0-d tensor seen as [1] (oneDNN has no 0-d tensors).
dnnl::memory::dims Dims(const Shape& shape);
// Row-major (plain) descriptor of `shape`.
dnnl::memory::desc PlainDesc(const Shape& shape, DType dtype);

// Appends dims and strides of `md` to a cache key.
std::string DescKey(const dnnl::memory::desc& md);

// Converts a dnnl::error raised while running `op` into an INTERNAL or OUT_OF_MEMORY status.
absl::Status FromDnnlError(const std::string& op, const dnnl::error& e);

// Runs `body` (returning absl::Status) with dnnl::error converted to a status.
template <typename Body>
absl::Status Guard(const std::string& op, Body&& body) {
  try {
    return body();
  } catch (const dnnl::error& e) {
    return FromDnnlError(op, e);
  }
}

// Runs the kernel after `name` in the table for a call the oneDNN kernel `name` declines for
// its values (a softmax row holding NaN or an infinity): shapes and attributes it does not
// reproduce are refused when the call is planned (Kernel::accepts).
absl::Status HandOn(KernelCall& c, const std::string& name);
// The status of a oneDNN kernel handed a call its `accepts` refuses (INTERNAL: the call was
// not planned), instead of running it wrongly.
absl::Status NotPlanned(const KernelCall& c);

// Whether every input of the call is f32 (the dtype oneDNN kernels handle here).
bool AllF32(absl::Span<const DType> dtypes);
// AllF32 and no "dtype" attribute asking for another output dtype (softmax).
bool F32InOut(absl::Span<const DType> dtypes, const Attrs* attrs);

// Post-ops (server/ops/fusion.h's chains) appended to a primitive: oneDNN's list and the
// operands its binary post-ops read, each with the descriptor it is read by.
struct PostOpChain {
  dnnl::post_ops ops;
  // What the chain appends to its primitive's cache key, read from `ops`.
  std::string Key() const;
  struct Operand {
    int post_index;  // the post-op that reads it
    const Tensor* tensor;
    dnnl::memory::desc md;     // as the post-op reads it
    dnnl::memory::desc plain;  // as the tensor holds it (reordered into `md` when they differ)
  };
  std::vector<Operand> operands;
};
// Attr() with the post-ops of `chain` (Attr() itself when null).
dnnl::primitive_attr AttrWith(const PostOpChain* chain);
// The argument slot of a chain operand.
inline int PostOperandArg(const PostOpChain::Operand& o) {
  return DNNL_ARG_ATTR_MULTIPLE_POST_OP(o.post_index) | DNNL_ARG_SRC_1;
}
// The largest magnitude in an f32 tensor, as its bit pattern with the sign cleared: integer
// order is the order of magnitudes, an infinity is 0x7f800000 and a NaN above it. One pass in
// eight integer lanes, which the compiler vectorizes (a loop over floats it does not).
int32_t MaxMagnitudeBits(const Tensor& t);
inline constexpr int32_t kInfinityBits = 0x7f800000;

// Whether oneDNN chose its reference implementation (slower than the loop kernels).
bool IsReference(const dnnl::primitive_desc_base& pd);

}  // namespace tensord::cpu::onednn

namespace tensord::cpu {
struct GemmProblem;
}  // namespace tensord::cpu

namespace tensord::cpu::onednn {

// One product on oneDNN's matmul, with `chain` applied to its result; false when oneDNN does
// not take the problem (nothing to multiply, or beyond its rank limit), which then ran on the
// loop GEMM without the chain.
bool RunGemm(const GemmProblem& p, const PostOpChain* chain = nullptr);

// Registration of the oneDNN kernel families (called from RegisterOneDnnKernels).
void RegisterMatmulKernels(KernelTable& t);
void RegisterNnKernels(KernelTable& t);
void RegisterEltwiseKernels(KernelTable& t);
void RegisterBinaryKernels(KernelTable& t);
void RegisterFusionKernels(KernelTable& t);

// Registers `fn` as op's oneDNN kernel for all-f32 calls, with oneDNN's exceptions turned into
// statuses (Guard). The convolution, pooling, normalization and resampling kernels claim their
// calls this way.
void AddF32Kernel(KernelTable& t, const std::string& op,
                  std::function<absl::Status(KernelCall&)> fn, CallPredicate accepts = nullptr);

}  // namespace tensord::cpu::onednn
