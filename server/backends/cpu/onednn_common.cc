#include "server/backends/cpu/onednn_common.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "server/core/host_memory.h"

namespace tensord::cpu::onednn {

const dnnl::primitive_attr& Attr() {
  static const dnnl::primitive_attr* attr = [] {
    auto* a = new dnnl::primitive_attr();
    a->set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }();
  return *attr;
}

void Execute(const CachedPrimitive& p, Args args) {
  // Per run, from the host pool: a buffer kept per thread would hold the largest scratchpad
  // any op ever needed on each gRPC thread, for the life of the process.
  std::optional<PooledMemory> pad;
  const dnnl::memory::desc scratch = p.pd.scratchpad_desc();
  if (scratch.get_size() > 0) {
    pad.emplace(scratch);
    args.emplace(DNNL_ARG_SCRATCHPAD, pad->get());
  }
  const TeamScope team(p.threads);
  p.primitive.execute(Stream(), args);
  Stream().wait();
}

PooledMemory::PooledMemory(const dnnl::memory::desc& md) : bytes_(md.get_size()) {
  // oneDNN wants a non-null handle even for an empty buffer.
  data_ = host_memory::Allocate(std::max<size_t>(bytes_, 1));
  if (data_ == nullptr) throw std::bad_alloc();
  memory_ = dnnl::memory(md, Engine(), data_);
}

PooledMemory::~PooledMemory() {
  if (data_ != nullptr) host_memory::Free(data_, std::max<size_t>(bytes_, 1));
}

dnnl::engine& Engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

dnnl::stream& Stream() {
  thread_local dnnl::stream stream(Engine());
  return stream;
}

dnnl::memory::data_type DataType(DType d) {
  switch (d) {
    case DType::kF32:
      return dnnl::memory::data_type::f32;
    case DType::kI32:
      return dnnl::memory::data_type::s32;
    default:
      return dnnl::memory::data_type::undef;
  }
}

dnnl::memory::dims Dims(const Shape& shape) {
  if (shape.empty()) return {1};
  return dnnl::memory::dims(shape.begin(), shape.end());
}

dnnl::memory::desc PlainDesc(const Shape& shape, DType dtype) {
  dnnl::memory::dims dims = Dims(shape);
  dnnl::memory::dims strides(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * std::max<int64_t>(dims[i + 1], 1);
  }
  return dnnl::memory::desc(dims, DataType(dtype), strides);
}

std::string PostOpChain::Key() const {
  std::string key;
  for (int i = 0; i < ops.len(); ++i) {
    if (ops.kind(i) == dnnl::primitive::kind::eltwise) {
      float scale, alpha, beta;
      dnnl::algorithm alg;
      ops.get_params_eltwise(i, scale, alg, alpha, beta);
      absl::StrAppend(&key, "e", static_cast<int>(alg), ":", alpha);
    } else {
      dnnl::algorithm alg;
      dnnl::memory::desc md;
      ops.get_params_binary(i, alg, md);
      absl::StrAppend(&key, "a", static_cast<int>(alg), DescKey(md));
    }
  }
  return key;
}

std::string DescKey(const dnnl::memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  std::string key =
      absl::StrCat("t", static_cast<int>(d.data_type), "f", static_cast<int>(d.format_kind), "[");
  for (int i = 0; i < d.ndims; ++i) {
    absl::StrAppend(&key, d.dims[i], ":", d.format_desc.blocking.strides[i], ",");
  }
  // Blocked layouts (oneDNN's choice for convolutions) differ in their inner blocks only.
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  for (int i = 0; i < b.inner_nblks; ++i)
    absl::StrAppend(&key, "/", b.inner_idxs[i], "x", b.inner_blks[i]);
  key += "]";
  return key;
}

absl::Status FromDnnlError(const std::string& op, const dnnl::error& e) {
  if (e.status == dnnl_out_of_memory) {
    return Error(Reason::kOutOfMemory, absl::StrCat("cpu: oneDNN ran out of memory in ", op),
                 {{"op", op}});
  }
  return Error(Reason::kInternal,
               absl::StrCat("cpu: oneDNN failed in ", op, ": ", e.what(), " (status ",
                            static_cast<int>(e.status), ")"),
               {{"op", op}, {"backend", "cpu"}});
}

absl::Status HandOn(KernelCall& c, const std::string& name) {
  std::vector<DType> dtypes;
  for (const Tensor& t : c.inputs) dtypes.push_back(t.dtype());
  const Kernel* next = KernelTable::Get().FindAfter(c.op, name, dtypes, &c.attrs);
  if (next == nullptr) {
    return Error(Reason::kUnsupportedOnBackend,
                 absl::StrCat("cpu: no kernel after ", name, " for this ", c.op.name, " call"),
                 {{"op", c.op.name}, {"backend", "cpu"}});
  }
  return next->run(c);
}

absl::Status NotPlanned(const KernelCall& c) {
  return Error(Reason::kInternal,
               absl::StrCat("cpu: onednn_", c.op.name, " was given a call it refuses when planned"),
               {{"op", c.op.name}, {"backend", "cpu"}});
}

bool AllF32(absl::Span<const DType> dtypes) {
  for (DType d : dtypes) {
    if (d != DType::kF32) return false;
  }
  return !dtypes.empty();
}

bool F32InOut(absl::Span<const DType> dtypes, const Attrs* attrs) {
  if (!AllF32(dtypes)) return false;
  if (attrs == nullptr) return true;
  const std::optional<DType> out = attrs->GetDType("dtype");
  return !out || *out == DType::kF32;
}

void AddF32Kernel(KernelTable& t, const std::string& op,
                  std::function<absl::Status(KernelCall&)> fn, CallPredicate accepts) {
  t.Add(op,
        Kernel{"onednn_" + op, [](absl::Span<const DType> d, const Attrs*) { return AllF32(d); },
               [fn](KernelCall& c) { return Guard(c.op.name, [&] { return fn(c); }); }, DTypeSet(),
               std::move(accepts)});
}

dnnl::primitive_attr AttrWith(const PostOpChain* chain) {
  if (chain == nullptr) return Attr();
  // A new attribute: copying a dnnl handle would share (and change) Attr()'s.
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_post_ops(chain->ops);
  return attr;
}

int32_t MaxMagnitudeBits(const Tensor& t) {
  const auto* bytes = static_cast<const unsigned char*>(t.raw());
  // The floats' bits, read as integers without aliasing them (memcpy compiles to a load).
  const auto bits = [bytes](int64_t i) {
    int32_t v;
    std::memcpy(&v, bytes + i * 4, 4);
    return v & 0x7fffffff;
  };
  const int64_t n = t.numel();
  int32_t lane[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      const int32_t a = bits(i + k);
      lane[k] = a > lane[k] ? a : lane[k];
    }
  }
  int32_t m = 0;
  for (int k = 0; k < 8; ++k) m = lane[k] > m ? lane[k] : m;
  for (; i < n; ++i) m = std::max(m, bits(i));
  return m;
}

bool IsReference(const dnnl::primitive_desc_base& pd) {
  return std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
}

}  // namespace tensord::cpu::onednn
