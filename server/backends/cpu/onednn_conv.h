// oneDNN's convolution primitives for a convolution of any spatial rank (see onednn_conv.cc).
#pragma once

#include <optional>
#include <string>

#include "server/backends/cpu/onednn_common.h"
#include "server/ops/nn_geometry.h"

namespace tensord::cpu::onednn {

// A convolution from x [N, C, *s] to y [N, O, *s'] with weight [O, C/g, *k] (batch 1 when
// unbatched).
struct ConvSetup {
  dnnl::memory::desc x, w, y, b;  // the tensors' plain layouts
  dnnl::memory::desc xa, wa, ya;  // the same dims in any layout, for the primitive to choose
  dnnl::memory::dims strides, dilates, pad_l, pad_r;
  bool bias = false;
  // The primitives' cache key (their kind and post-ops appended).
  std::string Key() const;
};

// The set-up of a convolution from x to y with weight w; nullopt when a tensor is empty or
// oneDNN's size rule (y = (x + pad_l + pad_r - extent) / stride + 1) cannot give y with symmetric
// padding (a transposed convolution's output_padding of at least its stride): the caller hands
// those calls on to the loop kernels.
std::optional<ConvSetup> MakeConvSetup(const Shape& x, const Shape& w, const Shape& y,
                                       const nn::ConvNdParams& p, bool bias);

// Where a convolution kernel finds the convolution's x, w and y in a call: an input's index, or
// kOutput for its output.
inline constexpr int kOutput = -1;
struct ConvRoles {
  int x, w, y;
};
// Whether MakeConvSetup gives a set-up for the call `q` describes (x, w and y at `roles`, the
// parameters read from its attributes for this spatial rank); true when the attributes are
// refused, which the kernel reports.
bool ConvSetupExists(const KernelQuery& q, ConvRoles roles, int spatial, bool transposed);

// y = conv(x, w) (+ b), then `chain`'s post-ops when given. A chain oneDNN cannot apply (it
// throws, or would run its reference implementation) is not run: false, and y is untouched.
bool RunConvForward(const ConvSetup& s, const Tensor& x, const Tensor& w, const Tensor* b,
                    Tensor& y, const PostOpChain* chain = nullptr);
// The layout the convolution without post-ops computes y in (a blocked one, usually): an
// operand added to y by a post-op is read in it, or oneDNN falls back to its slow
// plain-layout convolution.
dnnl::memory::desc ConvDstLayout(const ConvSetup& s, bool bias);
// gx = the adjoint of conv(., w) applied to gy.
void RunConvBackwardData(const ConvSetup& s, const Tensor& gy, const Tensor& w, Tensor& gx);
// gw = the gradient of <gy, conv(x, w)> with respect to w.
void RunConvBackwardWeights(const ConvSetup& s, const Tensor& gy, const Tensor& x, Tensor& gw);

}  // namespace tensord::cpu::onednn
