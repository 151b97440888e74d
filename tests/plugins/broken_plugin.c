/* Plugins the server must refuse at start, one per BROKEN_* definition (tests/plugins/
 * CMakeLists.txt builds each variant as its own library). Every variant would register a
 * valid op if it were loaded, so a refusal is due to the defect named, nothing else. */
#include "tensord/plugin.h"

#if !defined(BROKEN_NO_INIT)
static int32_t SameShape(const tensord_call* call, tensord_meta* outputs, int32_t num_outputs,
                         tensord_error* error) {
  int32_t d;
  (void)num_outputs;
  (void)error;
  outputs[0].dtype = call->inputs[0].dtype;
  outputs[0].rank = call->inputs[0].rank;
  for (d = 0; d < call->inputs[0].rank; ++d) outputs[0].shape[d] = call->inputs[0].shape[d];
  return TENSORD_OK;
}

static int32_t Copy(const tensord_call* call, tensord_tensor* outputs, int32_t num_outputs,
                    tensord_error* error) {
  (void)num_outputs;
  (void)error;
  memcpy(outputs[0].data, call->inputs[0].data, (size_t)tensord_numel(&call->inputs[0]) * 4u);
  return TENSORD_OK;
}
#endif

#if defined(BROKEN_ABI_VERSION)
/* Built against a future ABI the server does not speak. */
TENSORD_PLUGIN_EXPORT uint32_t tensord_plugin_abi_version(void) { return 99; }
#define OP_NAME "broken_abi_copy"
#elif defined(BROKEN_CLASH_BUILTIN)
TENSORD_PLUGIN_DEFINE_ABI_VERSION()
#define OP_NAME "relu" /* a built-in op */
#elif defined(BROKEN_CLASH_EXAMPLE)
TENSORD_PLUGIN_DEFINE_ABI_VERSION()
#define OP_NAME "example_clip_norm" /* an op of the example plugin */
#elif defined(BROKEN_MALFORMED)
TENSORD_PLUGIN_DEFINE_ABI_VERSION()
#define OP_NAME "broken_malformed_copy"
#elif defined(BROKEN_INIT_FAILS)
TENSORD_PLUGIN_DEFINE_ABI_VERSION()
#define OP_NAME "broken_init_copy"
#elif defined(BROKEN_NO_INIT)
/* Speaks the ABI but has no tensord_plugin_init. */
TENSORD_PLUGIN_DEFINE_ABI_VERSION()
#else
#error "define one BROKEN_* variant"
#endif

#if !defined(BROKEN_NO_INIT)
TENSORD_PLUGIN_EXPORT int32_t tensord_plugin_init(tensord_plugin_registrar* registrar) {
  tensord_op_def def = {0};
#if defined(BROKEN_INIT_FAILS)
  return tensord_fail(&registrar->error, TENSORD_ERR_INTERNAL,
                      "no licence for the copy op on this host");
#endif
  def.name = OP_NAME;
  def.min_inputs = def.max_inputs = 1;
  def.num_outputs = 1;
  def.dtypes = TENSORD_DTYPE_BIT(TENSORD_DTYPE_F32);
  def.shape = SameShape;
  def.cpu_kernel = Copy;
#if defined(BROKEN_MALFORMED)
  /* Refused: non-differentiable and yet with a backward kernel. */
  def.non_differentiable = 1;
  def.backward = (tensord_backward_fn)1;
#endif
  return registrar->register_op(registrar, &def);
}
#endif
