/* Test plugin: the parts of the ABI the example plugin does not use. test_sum_diff has two
 * inputs, two outputs and a backward kernel; test_count is non-differentiable, returns an i64
 * scalar, and reads a required float, a bool, an int and a string attribute. */
#include "tensord/plugin.h"

TENSORD_PLUGIN_DEFINE_ABI_VERSION()

/* (a, b) -> (a + b, a - b), a and b of one float dtype and shape. */
static int32_t SumDiffShape(const tensord_call* call, tensord_meta* outputs, int32_t num_outputs,
                            tensord_error* error) {
  const tensord_tensor* a = &call->inputs[0];
  const tensord_tensor* b = &call->inputs[1];
  int32_t d, k;
  if (a->dtype != b->dtype) {
    return tensord_fail(error, TENSORD_ERR_DTYPE_MISMATCH, "inputs have dtypes %d and %d",
                        (int)a->dtype, (int)b->dtype);
  }
  if (a->rank != b->rank || a->rank > TENSORD_PLUGIN_MAX_RANK) {
    return tensord_fail(error, TENSORD_ERR_SHAPE_MISMATCH, "inputs have ranks %d and %d",
                        (int)a->rank, (int)b->rank);
  }
  for (d = 0; d < a->rank; ++d) {
    if (a->shape[d] != b->shape[d]) {
      return tensord_fail(error, TENSORD_ERR_SHAPE_MISMATCH,
                          "inputs differ in dim %d: %lld vs %lld", (int)d, (long long)a->shape[d],
                          (long long)b->shape[d]);
    }
  }
  for (k = 0; k < num_outputs; ++k) {
    outputs[k].dtype = a->dtype;
    outputs[k].rank = a->rank;
    for (d = 0; d < a->rank; ++d) outputs[k].shape[d] = a->shape[d];
  }
  return TENSORD_OK;
}

#define SUM_DIFF(T, x, y, s, df) \
  do {                           \
    const T* xa = (const T*)(x); \
    const T* ya = (const T*)(y); \
    T* sa = (T*)(s);             \
    T* da = (T*)(df);            \
    for (i = 0; i < n; ++i) {    \
      sa[i] = xa[i] + ya[i];     \
      da[i] = xa[i] - ya[i];     \
    }                            \
  } while (0)

static int32_t SumDiff(const tensord_call* call, tensord_tensor* outputs, int32_t num_outputs,
                       tensord_error* error) {
  const int64_t n = tensord_numel(&call->inputs[0]);
  int64_t i;
  (void)num_outputs;
  (void)error;
  if (call->inputs[0].dtype == TENSORD_DTYPE_F32) {
    SUM_DIFF(float, call->inputs[0].data, call->inputs[1].data, outputs[0].data, outputs[1].data);
  } else {
    SUM_DIFF(double, call->inputs[0].data, call->inputs[1].data, outputs[0].data, outputs[1].data);
  }
  return TENSORD_OK;
}

/* d/da = g_sum + g_diff, d/db = g_sum - g_diff: the same map applied to the output grads. */
static int32_t SumDiffBackward(const tensord_call* call, const tensord_tensor* outputs,
                               const tensord_tensor* grad_outputs, int32_t num_outputs,
                               tensord_tensor* grad_inputs, tensord_error* error) {
  const int64_t n = tensord_numel(&call->inputs[0]);
  int64_t i;
  (void)outputs;
  (void)num_outputs;
  (void)error;
  if (call->inputs[0].dtype == TENSORD_DTYPE_F32) {
    SUM_DIFF(float, grad_outputs[0].data, grad_outputs[1].data, grad_inputs[0].data,
             grad_inputs[1].data);
  } else {
    SUM_DIFF(double, grad_outputs[0].data, grad_outputs[1].data, grad_inputs[0].data,
             grad_inputs[1].data);
  }
  return TENSORD_OK;
}

/* offset + the number of elements above (mode "above") or below (mode "below") threshold,
 * counting equality when inclusive. */
static int32_t CountShape(const tensord_call* call, tensord_meta* outputs, int32_t num_outputs,
                          tensord_error* error) {
  const char* mode = tensord_find_attr(call, "mode")->s;
  (void)num_outputs;
  if (strcmp(mode, "above") != 0 && strcmp(mode, "below") != 0) {
    return tensord_fail(error, TENSORD_ERR_BAD_ATTRIBUTE,
                        "mode must be 'above' or 'below', got '%s'", mode);
  }
  outputs[0].dtype = TENSORD_DTYPE_I64;
  outputs[0].rank = 0;
  return TENSORD_OK;
}

static int32_t Count(const tensord_call* call, tensord_tensor* outputs, int32_t num_outputs,
                     tensord_error* error) {
  const tensord_tensor* x = &call->inputs[0];
  const double threshold = tensord_find_attr(call, "threshold")->f;
  const int inclusive = tensord_find_attr(call, "inclusive")->i != 0;
  const int64_t offset = tensord_find_attr(call, "offset")->i;
  const int above = strcmp(tensord_find_attr(call, "mode")->s, "above") == 0;
  const int64_t n = tensord_numel(x);
  int64_t i, count = 0;
  (void)num_outputs;
  for (i = 0; i < n; ++i) {
    double v;
    switch (x->dtype) {
      case TENSORD_DTYPE_F32:
        v = ((const float*)x->data)[i];
        break;
      case TENSORD_DTYPE_F64:
        v = ((const double*)x->data)[i];
        break;
      case TENSORD_DTYPE_I32:
        v = ((const int32_t*)x->data)[i];
        break;
      case TENSORD_DTYPE_I64:
        v = (double)((const int64_t*)x->data)[i];
        break;
      default:
        return tensord_fail(error, TENSORD_ERR_DTYPE_MISMATCH, "dtype %d is not counted",
                            (int)x->dtype);
    }
    if (above ? (v > threshold || (inclusive && v == threshold))
              : (v < threshold || (inclusive && v == threshold))) {
      ++count;
    }
  }
  *(int64_t*)outputs[0].data = offset + count;
  return TENSORD_OK;
}

TENSORD_PLUGIN_EXPORT int32_t tensord_plugin_init(tensord_plugin_registrar* registrar) {
  static const char* const kSumDiffInputs[] = {"a", "b"};
  const uint32_t kFloats =
      TENSORD_DTYPE_BIT(TENSORD_DTYPE_F32) | TENSORD_DTYPE_BIT(TENSORD_DTYPE_F64);
  tensord_attr_spec count_attrs[4] = {{0}};
  tensord_op_def sum_diff = {0};
  tensord_op_def count = {0};
  int32_t status;

  sum_diff.name = "test_sum_diff";
  sum_diff.min_inputs = sum_diff.max_inputs = 2;
  sum_diff.num_outputs = 2;
  sum_diff.input_names = kSumDiffInputs;
  sum_diff.num_input_names = 2;
  sum_diff.dtypes = kFloats;
  sum_diff.shape = SumDiffShape;
  sum_diff.cpu_kernel = SumDiff;
  sum_diff.backward = SumDiffBackward;
  status = registrar->register_op(registrar, &sum_diff);
  if (status != TENSORD_OK) return status;

  count_attrs[0].name = "threshold";
  count_attrs[0].type = TENSORD_ATTR_FLOAT;
  count_attrs[0].required = 1;
  count_attrs[1].name = "inclusive";
  count_attrs[1].type = TENSORD_ATTR_BOOL;
  count_attrs[2].name = "offset";
  count_attrs[2].type = TENSORD_ATTR_INT;
  count_attrs[3].name = "mode";
  count_attrs[3].type = TENSORD_ATTR_STRING;
  count_attrs[3].default_string = "above";
  count.name = "test_count";
  count.min_inputs = count.max_inputs = 1;
  count.num_outputs = 1;
  count.attrs = count_attrs;
  count.num_attrs = 4;
  count.dtypes =
      kFloats | TENSORD_DTYPE_BIT(TENSORD_DTYPE_I32) | TENSORD_DTYPE_BIT(TENSORD_DTYPE_I64);
  count.shape = CountShape;
  count.cpu_kernel = Count;
  count.non_differentiable = 1;
  return registrar->register_op(registrar, &count);
}
