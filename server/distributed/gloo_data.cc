#include "server/distributed/gloo_data.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/half.h"
#include "gloo/allgather.h"
#include "gloo/allreduce.h"
#include "gloo/barrier.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/reduce.h"

namespace tensord::distributed {
namespace {

// The ring's segment: each step of Gloo's ring sends one. Small segments mean many messages,
// each a wake-up of the receiving thread: 4 ranks on 2 cores reduced 16 MiB in 136-164 ms
// with 112 KiB segments, 64-71 ms with 1 MiB, 81-170 ms with 4 MiB. The ring also allocates
// scratch of two segments per call, which above the server's malloc mmap threshold (256 KiB,
// server/core/host_memory.cc) is fresh pages each time: 512 page faults a call, a few ms, far
// less than what larger segments save.
constexpr size_t kSegmentBytes = size_t{1} << 20;

template <typename T>
gloo::AllreduceOptions::Func ReduceFn(const std::string& op) {
  void (*fn)(void*, const void*, const void*, size_t) = &gloo::sum<T>;
  if (op == "product") fn = &gloo::product<T>;
  if (op == "max") fn = &gloo::max<T>;
  if (op == "min") fn = &gloo::min<T>;
  return fn;
}

template <typename T>
void DivideBy(void* data, size_t n, int world) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<T>(p[i] / static_cast<T>(world));
}

class HostData {
 public:
  HostData(const std::shared_ptr<gloo::Context>& context, std::chrono::milliseconds timeout)
      : context_(context), timeout_(timeout) {}

  // The data of an agreed collective.
  void Move(const CollectiveCall& call, uint32_t seq) {
    const CollectiveKind kind = call.op.collective;
    if (kind == CollectiveKind::kBarrier) {
      gloo::BarrierOptions opts(context_);
      opts.setTag(seq);
      opts.setTimeout(timeout_);
      gloo::barrier(opts);
      return;
    }
    const Tensor& in = call.inputs[0];
    Tensor& out = call.outputs[0];
    const size_t n = static_cast<size_t>(in.numel());
    const size_t bytes = in.nbytes();
    const int world = size();
    switch (kind) {
      case CollectiveKind::kAllGather: {
        if (bytes == 0) return;
        gloo::AllgatherOptions opts(context_);
        opts.setInput(static_cast<uint8_t*>(const_cast<void*>(in.raw())), bytes);
        opts.setOutput(static_cast<uint8_t*>(out.raw()), bytes * world);
        opts.setTag(seq);
        opts.setTimeout(timeout_);
        gloo::allgather(opts);
        return;
      }
      case CollectiveKind::kBroadcast: {
        std::memcpy(out.raw(), in.raw(), bytes);
        if (bytes == 0) return;
        gloo::BroadcastOptions opts(context_);
        opts.setOutput(static_cast<uint8_t*>(out.raw()), bytes);
        opts.setRoot(static_cast<int>(call.attrs.GetInt("src")));
        opts.setTag(seq);
        opts.setTimeout(timeout_);
        gloo::broadcast(opts);
        return;
      }
      default:
        break;
    }
    // The reducing collectives, per dtype; bf16 and f16 are reduced in f32 and rounded once,
    // u8, i8 and i16 in i32 and narrowed (wrapping as the narrow dtype's own sum would), as
    // the CPU kernels compute them.
    void* out_data = out.raw();
    switch (in.dtype()) {
      case DType::kF32:
        return Reduce<float>(call, seq, in.data<float>(), out.data<float>(), n);
      case DType::kF64:
        return Reduce<double>(call, seq, in.data<double>(), out.data<double>(), n);
      case DType::kI32:
        return Reduce<int32_t>(call, seq, in.data<int32_t>(), out.data<int32_t>(), n);
      case DType::kI64:
        return Reduce<int64_t>(call, seq, in.data<int64_t>(), out.data<int64_t>(), n);
      case DType::kBF16:
      case DType::kF16: {
        const bool bf16 = in.dtype() == DType::kBF16;
        const uint16_t* bits = in.data<uint16_t>();
        std::vector<float> wide_in(n), wide_out(out.numel());
        for (size_t i = 0; i < n; ++i) {
          wide_in[i] = bf16 ? BF16ToFloat(bits[i]) : HalfToFloat(bits[i]);
        }
        Reduce<float>(call, seq, wide_in.data(), wide_out.data(), n);
        uint16_t* out_bits = static_cast<uint16_t*>(out_data);
        for (size_t i = 0; i < wide_out.size(); ++i) {
          out_bits[i] = bf16 ? FloatToBF16(wide_out[i]) : FloatToHalf(wide_out[i]);
        }
        return;
      }
      case DType::kU8:
        return ReduceWidened<uint8_t>(call, seq, in, out, n);
      case DType::kI8:
        return ReduceWidened<int8_t>(call, seq, in, out, n);
      case DType::kI16:
        return ReduceWidened<int16_t>(call, seq, in, out, n);
      default:
        throw std::logic_error(absl::StrCat("no reduction over ", DTypeName(in.dtype())));
    }
  }

  // A reduction of a narrow integer dtype N through i32.
  template <typename N>
  void ReduceWidened(const CollectiveCall& call, uint32_t seq, const Tensor& in, Tensor& out,
                     size_t n) {
    const N* src = in.data<N>();
    std::vector<int32_t> wide_in(src, src + n), wide_out(out.numel());
    Reduce<int32_t>(call, seq, wide_in.data(), wide_out.data(), n);
    N* dst = out.data<N>();
    for (size_t i = 0; i < wide_out.size(); ++i) dst[i] = static_cast<N>(wide_out[i]);
  }

  // all_reduce, reduce_scatter and reduce of n elements at `src` into `dst` (the output).
  template <typename T>
  void Reduce(const CollectiveCall& call, uint32_t seq, const T* src, T* dst, size_t n) {
    const CollectiveKind kind = call.op.collective;
    const std::string op = call.attrs.Has("op") ? call.attrs.GetString("op") : "sum";
    const int world = size();
    if (kind == CollectiveKind::kReduce) {
      const int root = static_cast<int>(call.attrs.GetInt("dst"));
      std::vector<T> result(n);
      if (n > 0) {
        gloo::ReduceOptions opts(context_);
        opts.setInput(const_cast<T*>(src), n);
        opts.setOutput(result.data(), n);
        opts.setRoot(root);
        opts.setReduceFunction(ReduceFn<T>(op));
        opts.setMaxSegmentSize(kSegmentBytes);
        opts.setTag(seq);
        opts.setTimeout(timeout_);
        gloo::reduce(opts);
      }
      if (rank() == root) {
        std::copy(result.begin(), result.end(), dst);
      } else {
        std::fill(dst, dst + n, T(0));
      }
      return;
    }
    // all_reduce writes the output; reduce_scatter reduces all of it and keeps its rank's part.
    std::vector<T> whole(kind == CollectiveKind::kReduceScatter ? n : 0);
    T* target = kind == CollectiveKind::kReduceScatter ? whole.data() : dst;
    if (n > 0) {
      gloo::AllreduceOptions opts(context_);
      opts.setInput(const_cast<T*>(src), n);
      opts.setOutput(target, n);
      opts.setReduceFunction(ReduceFn<T>(op));
      opts.setMaxSegmentSize(kSegmentBytes);
      opts.setTag(seq);
      opts.setTimeout(timeout_);
      gloo::allreduce(opts);
    }
    if (op == "mean") DivideBy<T>(target, n, world);
    if (kind == CollectiveKind::kReduceScatter) {
      const size_t part = n / world;
      std::copy(target + part * rank(), target + part * (rank() + 1), dst);
    }
  }

 private:
  int rank() const { return context_->rank; }
  int size() const { return context_->size; }

  const std::shared_ptr<gloo::Context>& context_;
  const std::chrono::milliseconds timeout_;
};

}  // namespace

void MoveWithGloo(const std::shared_ptr<gloo::Context>& context, const CollectiveCall& call,
                  uint32_t seq, std::chrono::milliseconds timeout) {
  HostData(context, timeout).Move(call, seq);
}

}  // namespace tensord::distributed
