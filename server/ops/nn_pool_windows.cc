#include "server/ops/nn_pool_windows.h"

#include <algorithm>

#include "server/core/status.h"

namespace tensord::nn {
namespace {

PoolWindow MaxWindow(const Pool2dParams& p, const Nchw& x, int64_t oh, int64_t ow) {
  PoolWindow w;
  w.dh = p.dilation[0];
  w.dw = p.dilation[1];
  w.hs = oh * p.stride[0] - p.padding[0];
  while (w.hs < 0) w.hs += w.dh;
  w.he = std::min(oh * p.stride[0] - p.padding[0] + (p.kernel[0] - 1) * w.dh + 1, x.h);
  w.ws = ow * p.stride[1] - p.padding[1];
  while (w.ws < 0) w.ws += w.dw;
  w.we = std::min(ow * p.stride[1] - p.padding[1] + (p.kernel[1] - 1) * w.dw + 1, x.w);
  return w;
}

// Clipped to the input, divided by divisor_override, or by the window's size counting the
// padding it covers (count_include_pad), or by the elements it covers.
PoolWindow AvgWindow(const Pool2dParams& p, const Attrs& attrs, const Nchw& x, int64_t oh,
                     int64_t ow) {
  PoolWindow w;
  w.hs = oh * p.stride[0] - p.padding[0];
  w.ws = ow * p.stride[1] - p.padding[1];
  w.he = std::min(w.hs + p.kernel[0], x.h + p.padding[0]);
  w.we = std::min(w.ws + p.kernel[1], x.w + p.padding[1]);
  const int64_t pool_size = (w.he - w.hs) * (w.we - w.ws);
  w.hs = std::max<int64_t>(w.hs, 0);
  w.ws = std::max<int64_t>(w.ws, 0);
  w.he = std::min(w.he, x.h);
  w.we = std::min(w.we, x.w);
  w.divisor = attrs.Has("divisor_override")        ? attrs.GetInt("divisor_override")
              : attrs.GetBool("count_include_pad") ? pool_size
                                                   : (w.he - w.hs) * (w.we - w.ws);
  return w;
}

// Output (i, j) spans rows [floor(i * H / oH), ceil((i + 1) * H / oH)) and the same for
// columns, divided by its size.
PoolWindow AdaptiveWindow(const Nchw& x, const Nchw& y, int64_t oh, int64_t ow) {
  PoolWindow w;
  w.hs = AdaptiveStart(oh, x.h, y.h);
  w.he = AdaptiveEnd(oh, x.h, y.h);
  w.ws = AdaptiveStart(ow, x.w, y.w);
  w.we = AdaptiveEnd(ow, x.w, y.w);
  w.divisor = (w.he - w.hs) * (w.we - w.ws);
  return w;
}

}  // namespace

bool IsMaxPool(const std::string& op) { return op.find("max_pool") != std::string::npos; }

absl::StatusOr<std::vector<PoolWindow>> PoolWindows(const std::string& op, const Attrs& attrs,
                                                    const Nchw& x, const Nchw& y) {
  const bool adaptive = op.rfind("adaptive_", 0) == 0;
  const bool max_pool = IsMaxPool(op);
  Pool2dParams p;
  if (!adaptive) {
    ASSIGN_OR_RETURN(p, ReadPool2dParams(op, attrs, max_pool));
  }
  std::vector<PoolWindow> windows;
  windows.reserve(static_cast<size_t>(y.h * y.w));
  for (int64_t oh = 0; oh < y.h; ++oh) {
    for (int64_t ow = 0; ow < y.w; ++ow) {
      windows.push_back(adaptive   ? AdaptiveWindow(x, y, oh, ow)
                        : max_pool ? MaxWindow(p, x, oh, ow)
                                   : AvgWindow(p, attrs, x, oh, ow));
    }
  }
  return windows;
}

}  // namespace tensord::nn
