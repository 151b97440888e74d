#include "server/backends/gpu/conv_gemm.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/backends/gpu/launch.h"
#include "server/core/matmul_precision.h"
#include "server/core/status.h"

namespace tensord::gpu {
namespace {

std::atomic<bool> through_gemm{true};
std::atomic<int64_t> columns_bytes{kConvColumnsBytes};

// The sizes of a correlation as the passes multiply them: R rows of columns per group (input
// channels of a group times taps), P output positions, Q input positions.
struct Sizes {
  int64_t n, groups, xc, yc, cin, cout, taps, p, q, r;
};

Sizes SizesOf(const nn::Correlation& g) {
  Sizes s{g.n, g.groups, g.xc, g.yc, g.cin_g, g.cout_g, 1, 1, 1, 0};
  for (int d = 0; d < 3; ++d) {
    s.taps *= g.k[d];
    s.p *= g.ys[d];
    s.q *= g.xs[d];
  }
  s.r = s.cin * s.taps;
  return s;
}

// The launches of conv_source.h's column kernels for one correlation, with its geometry.
class ColumnKernels {
 public:
  // The geometry goes to the device first: Make fails where it cannot.
  static absl::StatusOr<ColumnKernels> Make(DeviceRuntime& device, const nn::Correlation& g,
                                            DType dtype) {
    ASSIGN_OR_RETURN(Operand geometry, Operand::Constants(device, CorrelationFlat(g)));
    return ColumnKernels(device, SizesOf(g), dtype, std::move(geometry));
  }

  // cols <- the patches of images [n0, n0 + nc).
  absl::Status Columns(const Operand& cols, const Operand& x, int64_t n0, int64_t nc,
                       int64_t row_stride, int64_t image_stride) {
    Launch launch(Kernel("cols", RenderConvColumns), nc * s_.xc * s_.p);
    launch.args.AddMem(cols).AddMem(x).AddMem(geometry_).Add(n0).Add(row_stride);
    launch.args.Add(image_stride).Add(launch.items);
    return Enqueue(device_, launch);
  }

  // Images [n0, n0 + nc) of x <- the columns.
  absl::Status FromColumns(const Operand& x, const Operand& cols, int64_t n0, int64_t nc) {
    Launch launch(Kernel("uncols", RenderConvFromColumns), nc * s_.xc * s_.q);
    launch.args.AddMem(x).AddMem(cols).AddMem(geometry_).Add(n0).Add(launch.items);
    return Enqueue(device_, launch);
  }

  // out <- images [n0, n0 + nc) of y, channels first.
  absl::Status ChannelsFirst(const Operand& out, const Operand& y, int64_t n0, int64_t nc) {
    Launch launch(Kernel("channels_first", RenderConvChannelsFirst), nc * s_.yc * s_.p);
    launch.args.AddMem(out).AddMem(y).AddMem(geometry_).Add(n0).Add(nc).Add(launch.items);
    return Enqueue(device_, launch);
  }

 private:
  using Render = std::string (*)(const Dialect&, const std::string&, DType);

  ColumnKernels(DeviceRuntime& device, Sizes s, DType dtype, Operand geometry)
      : device_(device), s_(s), dtype_(dtype), geometry_(std::move(geometry)) {}

  KernelSource Kernel(const char* what, Render render) const {
    const std::string name = absl::StrCat("td_conv_", what, "_", DTypeName(dtype_));
    return KernelSource{name, name, [render, name, dtype = dtype_](const Dialect& d) {
                          return render(d, name, dtype);
                        }};
  }

  DeviceRuntime& device_;
  Sizes s_;
  DType dtype_;
  Operand geometry_;
};

// The GEMM of one chunk: `batch` products of the shape, in the session's f32 precision.
GemmShape Product(DType dtype, size_t rows, size_t cols, size_t inner, size_t batch) {
  GemmShape shape;
  shape.dtype = dtype;
  shape.rows = rows;
  shape.cols = cols;
  shape.inner = inner;
  shape.batch = batch;
  shape.precision = MatmulPrecisionScope::Current();
  return shape;
}

}  // namespace

bool ConvTakesGemm(const DeviceRuntime& device, DType dtype, const nn::Correlation& g) {
  const Sizes s = SizesOf(g);
  if (!through_gemm.load() || !device.GemmTakes(dtype) || s.n <= 0 || s.groups <= 0 || s.cin <= 0 ||
      s.cout <= 0 || s.taps <= 0 || s.p <= 0 || s.q <= 0) {
    return false;
  }
  // In doubles: the product of the sizes may pass int64 for a shape the direct kernels take.
  const double image_bytes = (static_cast<double>(s.xc) * s.taps + s.yc) * s.p * DTypeSize(dtype);
  return image_bytes <= static_cast<double>(kMaxImageColumnsBytes);
}

absl::StatusOr<bool> ConvThroughGemm(DeviceRuntime& device, ConvPass pass, const nn::Correlation& g,
                                     const Tensor& a, const Tensor& b, const Tensor* bias,
                                     Tensor& out, std::shared_ptr<MemoryAccount> account) {
  const DType dtype = out.dtype();
  const Sizes s = SizesOf(g);
  // Images per chunk: the columns (and, for the weight gradient, y's channels-first copy),
  // within the bound and within the largest tensor the session may allocate.
  const int64_t per_image =
      (s.xc * s.taps * s.p + (pass == ConvPass::kW ? s.yc * s.p : 0)) * DTypeSize(dtype);
  int64_t budget = columns_bytes.load();
  if (account != nullptr) budget = std::min(budget, account->max_charge_bytes());
  const int64_t chunk = std::clamp<int64_t>(budget / per_image, 1, s.n);
  // The workspace first: where the quota or the device's memory refuses it, nothing has been
  // enqueued and the direct kernels, which need none, run the call instead.
  absl::StatusOr<Tensor> columns = Tensor::EmptyOn(
      device.shared_from_this(), dtype, {chunk * s.xc * s.taps * s.p}, out.device(), account);
  absl::StatusOr<Tensor> channels_first =
      pass == ConvPass::kW ? Tensor::EmptyOn(device.shared_from_this(), dtype, {chunk * s.yc * s.p},
                                             out.device(), account)
                           : absl::StatusOr<Tensor>(Tensor());
  if (!columns.ok() || !channels_first.ok()) return false;
  const Tensor& cols = *columns;
  ASSIGN_OR_RETURN(ColumnKernels kernels, ColumnKernels::Make(device, g, dtype));
  ASSIGN_OR_RETURN(Operand a_arg, Operand::Of(a, device));
  ASSIGN_OR_RETURN(Operand b_arg, Operand::Of(b, device));
  ASSIGN_OR_RETURN(Operand out_arg, Operand::Of(out, device));
  ASSIGN_OR_RETURN(Operand cols_arg, Operand::Of(cols, device));
  const size_t image_cols = static_cast<size_t>(s.xc * s.taps * s.p);  // one image's columns
  const size_t group_w = static_cast<size_t>(s.cout * s.r);            // one group's weights
  const size_t y_image = static_cast<size_t>(s.yc * s.p);              // one image of y

  if (pass == ConvPass::kW) {
    // out[g] (cout x r) = sum over the chunks of y[g] (cout x nc*P) cols[g]^T (nc*P x r), the
    // columns laid out group-row by image-column.
    ASSIGN_OR_RETURN(Operand y_arg, Operand::Of(*channels_first, device));
    for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
      const int64_t nc = std::min(chunk, s.n - n0);
      RETURN_IF_ERROR(kernels.Columns(cols_arg, b_arg, n0, nc, nc * s.p, s.p));
      RETURN_IF_ERROR(kernels.ChannelsFirst(y_arg, a_arg, n0, nc));
      GemmShape shape = Product(dtype, s.cout, s.r, nc * s.p, s.groups);
      shape.transpose_b = true;
      shape.a_stride = s.cout * nc * s.p;
      shape.b_stride = s.r * nc * s.p;
      shape.accumulate = n0 > 0;
      RETURN_IF_ERROR(
          device.Gemm(shape, y_arg.block(), cols_arg.block(), out_arg.mutable_block(), nullptr));
    }
    return true;
  }

  // One GEMM per chunk when the weights are one matrix (groups 1), else one per image of
  // `groups` products.
  const bool image_by_image = s.groups > 1;
  for (int64_t n0 = 0; n0 < s.n; n0 += chunk) {
    const int64_t nc = std::min(chunk, s.n - n0);
    if (pass == ConvPass::kY) {
      // y[n][g] (cout x P) = w[g] (cout x r) cols[n][g] (r x P).
      RETURN_IF_ERROR(kernels.Columns(cols_arg, a_arg, n0, nc, s.p, image_cols));
      for (int64_t k = 0; k < (image_by_image ? nc : 1); ++k) {
        GemmShape shape = Product(dtype, s.cout, s.p, s.r, image_by_image ? s.groups : nc);
        shape.a_stride = image_by_image ? group_w : 0;
        shape.b_stride = s.r * s.p;
        shape.b_offset = k * image_cols;
        shape.c_offset = (n0 + k) * y_image;
        RETURN_IF_ERROR(
            device.Gemm(shape, b_arg.block(), cols_arg.block(), out_arg.mutable_block(), nullptr));
      }
    } else {
      // cols[n][g] (r x P) = w[g]^T (r x cout) y[n][g] (cout x P), then gathered into x.
      for (int64_t k = 0; k < (image_by_image ? nc : 1); ++k) {
        GemmShape shape = Product(dtype, s.r, s.p, s.cout, image_by_image ? s.groups : nc);
        shape.transpose_a = true;
        shape.a_stride = image_by_image ? group_w : 0;
        shape.b_stride = s.cout * s.p;
        shape.b_offset = (n0 + k) * y_image;
        shape.c_offset = k * image_cols;
        RETURN_IF_ERROR(
            device.Gemm(shape, b_arg.block(), a_arg.block(), cols_arg.mutable_block(), nullptr));
      }
      RETURN_IF_ERROR(kernels.FromColumns(out_arg, cols_arg, n0, nc));
    }
  }
  if (bias != nullptr) {
    // One value per channel: [C] viewed as [C, 1, ...] over the spatial dims of the weights.
    Shape per_channel(b.rank() - 1, 1);
    per_channel[0] = bias->numel();
    RETURN_IF_ERROR(AddInPlace(device, bias->Reshaped(std::move(per_channel)), out));
  }
  return true;
}

void SetConvThroughGemm(bool on, int64_t bytes) {
  through_gemm.store(on);
  columns_bytes.store(bytes > 0 ? bytes : kConvColumnsBytes);
}

}  // namespace tensord::gpu
