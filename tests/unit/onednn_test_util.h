// Shared by the oneDNN cache tests: a primitive cheap to build.
#pragma once

#include <cstdint>

#include "server/backends/cpu/onednn_common.h"

namespace tensord::testing {

// Relu over `n` f32 values.
inline cpu::onednn::CachedPrimitive ReluPrimitive(int64_t n) {
  const dnnl::memory::desc md({n}, dnnl::memory::data_type::f32, dnnl::memory::format_tag::a);
  const dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::eltwise_relu, md, 0.f, 0.f);
  const dnnl::eltwise_forward::primitive_desc pd(d, cpu::onednn::Engine());
  return cpu::onednn::CachedPrimitive{dnnl::eltwise_forward(pd), pd};
}

}  // namespace tensord::testing
