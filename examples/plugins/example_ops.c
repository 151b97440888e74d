/* An example tensord plugin, in plain C against include/tensord/plugin.h (docs/plugins.md):
 *
 *   example_scaled_square(x; scale=1.0)               y = scale * x^2, with a backward kernel
 *   example_clip_norm(x; max_norm=1.0, norm_type=2.0) x rescaled so that its norm is at most
 *       max_norm, as torch.nn.utils.clip_grad_norm_ does to one tensor; registered with no
 *       autodiff marking, so it refuses autodiff tensors (OPERATION_NOT_MARKED_FOR_AUTODIFF).
 */
#include <math.h>

#include "tensord/plugin.h"

TENSORD_PLUGIN_DEFINE_ABI_VERSION()

/* Both ops take one f32/f64 tensor and return a tensor of its dtype and shape. */
static int32_t SameAsInput(const tensord_call* call, tensord_meta* outputs, int32_t num_outputs,
                           tensord_error* error) {
  const tensord_tensor* x = &call->inputs[0];
  int32_t d;
  (void)num_outputs;
  if (x->rank > TENSORD_PLUGIN_MAX_RANK) {
    return tensord_fail(error, TENSORD_ERR_SHAPE_MISMATCH, "rank %d is above %d", (int)x->rank,
                        TENSORD_PLUGIN_MAX_RANK);
  }
  outputs[0].dtype = x->dtype;
  outputs[0].rank = x->rank;
  for (d = 0; d < x->rank; ++d) outputs[0].shape[d] = x->shape[d];
  return TENSORD_OK;
}

/* ---- example_scaled_square ------------------------------------------------------------- */

#define SCALED_SQUARE(T)                                                 \
  do {                                                                   \
    const T* in = (const T*)x->data;                                     \
    T* out = (T*)y->data;                                                \
    for (i = 0; i < n; ++i) out[i] = (T)(scale * (double)in[i] * in[i]); \
  } while (0)

static int32_t ScaledSquare(const tensord_call* call, tensord_tensor* outputs, int32_t num_outputs,
                            tensord_error* error) {
  const tensord_tensor* x = &call->inputs[0];
  tensord_tensor* y = &outputs[0];
  const double scale = tensord_find_attr(call, "scale")->f;
  const int64_t n = tensord_numel(x);
  int64_t i;
  (void)num_outputs;
  if (x->dtype == TENSORD_DTYPE_F32) {
    SCALED_SQUARE(float);
  } else if (x->dtype == TENSORD_DTYPE_F64) {
    SCALED_SQUARE(double);
  } else {
    return tensord_fail(error, TENSORD_ERR_DTYPE_MISMATCH, "dtype %d is not f32 or f64",
                        (int)x->dtype);
  }
  return TENSORD_OK;
}

/* d(scale * x^2)/dx = 2 * scale * x */
#define SCALED_SQUARE_GRAD(T)                                                 \
  do {                                                                        \
    const T* in = (const T*)x->data;                                          \
    const T* gy = (const T*)grad_outputs[0].data;                             \
    T* gx = (T*)grad_inputs[0].data;                                          \
    for (i = 0; i < n; ++i) gx[i] = (T)(2.0 * scale * (double)in[i] * gy[i]); \
  } while (0)

static int32_t ScaledSquareBackward(const tensord_call* call, const tensord_tensor* outputs,
                                    const tensord_tensor* grad_outputs, int32_t num_outputs,
                                    tensord_tensor* grad_inputs, tensord_error* error) {
  const tensord_tensor* x = &call->inputs[0];
  const double scale = tensord_find_attr(call, "scale")->f;
  const int64_t n = tensord_numel(x);
  int64_t i;
  (void)outputs;
  (void)num_outputs;
  if (x->dtype == TENSORD_DTYPE_F32) {
    SCALED_SQUARE_GRAD(float);
  } else if (x->dtype == TENSORD_DTYPE_F64) {
    SCALED_SQUARE_GRAD(double);
  } else {
    return tensord_fail(error, TENSORD_ERR_DTYPE_MISMATCH, "dtype %d is not f32 or f64",
                        (int)x->dtype);
  }
  return TENSORD_OK;
}

/* ---- example_clip_norm ----------------------------------------------------------------- */

static int32_t ClipNormShape(const tensord_call* call, tensord_meta* outputs, int32_t num_outputs,
                             tensord_error* error) {
  const double max_norm = tensord_find_attr(call, "max_norm")->f;
  const double norm_type = tensord_find_attr(call, "norm_type")->f;
  if (!(max_norm >= 0)) {
    return tensord_fail(error, TENSORD_ERR_BAD_ATTRIBUTE, "max_norm must be >= 0, got %g",
                        max_norm);
  }
  if (!(norm_type > 0)) {
    return tensord_fail(error, TENSORD_ERR_BAD_ATTRIBUTE,
                        "norm_type must be positive (or inf), got %g", norm_type);
  }
  return SameAsInput(call, outputs, num_outputs, error);
}

#define CLIP_NORM(T)                                                          \
  do {                                                                        \
    const T* in = (const T*)x->data;                                          \
    T* out = (T*)y->data;                                                     \
    double norm = 0, coef;                                                    \
    for (i = 0; i < n; ++i) {                                                 \
      const double a = fabs((double)in[i]);                                   \
      if (isinf(norm_type)) {                                                 \
        if (a > norm || isnan(a)) norm = a;                                   \
      } else {                                                                \
        norm += pow(a, norm_type);                                            \
      }                                                                       \
    }                                                                         \
    if (!isinf(norm_type)) norm = pow(norm, 1.0 / norm_type);                 \
    /* torch.nn.utils.clip_grad_norm_: max_norm / (norm + 1e-6), at most 1 */ \
    coef = max_norm / (norm + 1e-6);                                          \
    if (coef > 1.0) coef = 1.0;                                               \
    for (i = 0; i < n; ++i) out[i] = (T)((double)in[i] * coef);               \
  } while (0)

static int32_t ClipNorm(const tensord_call* call, tensord_tensor* outputs, int32_t num_outputs,
                        tensord_error* error) {
  const tensord_tensor* x = &call->inputs[0];
  tensord_tensor* y = &outputs[0];
  const double max_norm = tensord_find_attr(call, "max_norm")->f;
  const double norm_type = tensord_find_attr(call, "norm_type")->f;
  const int64_t n = tensord_numel(x);
  int64_t i;
  (void)num_outputs;
  if (x->dtype == TENSORD_DTYPE_F32) {
    CLIP_NORM(float);
  } else if (x->dtype == TENSORD_DTYPE_F64) {
    CLIP_NORM(double);
  } else {
    return tensord_fail(error, TENSORD_ERR_DTYPE_MISMATCH, "dtype %d is not f32 or f64",
                        (int)x->dtype);
  }
  return TENSORD_OK;
}

/* ---- registration ---------------------------------------------------------------------- */

TENSORD_PLUGIN_EXPORT int32_t tensord_plugin_init(tensord_plugin_registrar* registrar) {
  static const char* const kInput[] = {"input"};
  const uint32_t kFloats =
      TENSORD_DTYPE_BIT(TENSORD_DTYPE_F32) | TENSORD_DTYPE_BIT(TENSORD_DTYPE_F64);
  tensord_attr_spec square_attrs[1] = {{0}};
  tensord_attr_spec clip_attrs[2] = {{0}};
  tensord_op_def square = {0};
  tensord_op_def clip = {0};
  int32_t status;

  square_attrs[0].name = "scale";
  square_attrs[0].type = TENSORD_ATTR_FLOAT;
  square_attrs[0].default_float = 1.0;
  square.name = "example_scaled_square";
  square.doc = "scale * input^2 (example plugin, with a backward kernel)";
  square.min_inputs = square.max_inputs = 1;
  square.num_outputs = 1;
  square.input_names = kInput;
  square.num_input_names = 1;
  square.attrs = square_attrs;
  square.num_attrs = 1;
  square.dtypes = kFloats;
  square.shape = SameAsInput;
  square.cpu_kernel = ScaledSquare;
  square.backward = ScaledSquareBackward;
  status = registrar->register_op(registrar, &square);
  if (status != TENSORD_OK) return status;

  clip_attrs[0].name = "max_norm";
  clip_attrs[0].type = TENSORD_ATTR_FLOAT;
  clip_attrs[0].default_float = 1.0;
  clip_attrs[1].name = "norm_type";
  clip_attrs[1].type = TENSORD_ATTR_FLOAT;
  clip_attrs[1].default_float = 2.0;
  clip.name = "example_clip_norm";
  clip.doc =
      "input scaled to a norm of at most max_norm, as torch.nn.utils.clip_grad_norm_ "
      "(example plugin, no autodiff marking)";
  clip.min_inputs = clip.max_inputs = 1;
  clip.num_outputs = 1;
  clip.input_names = kInput;
  clip.num_input_names = 1;
  clip.attrs = clip_attrs;
  clip.num_attrs = 2;
  clip.dtypes = kFloats;
  clip.shape = ClipNormShape;
  clip.cpu_kernel = ClipNorm;
  /* Neither a backward kernel nor non_differentiable: the op is unmarked. */
  return registrar->register_op(registrar, &clip);
}
