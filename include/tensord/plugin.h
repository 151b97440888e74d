/* tensord custom-op plugin ABI (pure C; see docs/plugins.md).
 *
 * A plugin is a shared library that exports two functions:
 *
 *   uint32_t tensord_plugin_abi_version(void);   -- TENSORD_PLUGIN_DEFINE_ABI_VERSION() writes it
 *   int32_t tensord_plugin_init(tensord_plugin_registrar* registrar);
 *
 * The server reads the ABI version first and refuses a plugin built against another version
 * without calling anything else in it. tensord_plugin_init then registers ops through
 * registrar->register_op. The server copies everything it is given (strings, arrays), so the
 * descriptors may live on the plugin's stack; the function pointers must stay valid while the
 * library is loaded, which is until the process exits (plugins are never unloaded).
 *
 * Versioning: any change to a struct layout, a callback signature, an enum value or the
 * meaning of a field bumps TENSORD_PLUGIN_ABI_VERSION. A server loads only plugins whose
 * version it supports (this header's version). Nothing in this file may be reordered.
 */
#ifndef TENSORD_PLUGIN_H_
#define TENSORD_PLUGIN_H_

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TENSORD_PLUGIN_ABI_VERSION 1

#if defined(__GNUC__)
#define TENSORD_PLUGIN_EXPORT __attribute__((visibility("default")))
#else
#define TENSORD_PLUGIN_EXPORT
#endif

/* Element types. Tensors are dense, row-major, contiguous, little-endian; bool is one byte
 * (0 or 1). */
typedef enum tensord_dtype {
  TENSORD_DTYPE_F32 = 0,
  TENSORD_DTYPE_F64 = 1,
  TENSORD_DTYPE_I32 = 2,
  TENSORD_DTYPE_I64 = 3,
  TENSORD_DTYPE_BOOL = 4
} tensord_dtype;

/* A set of dtypes for tensord_op_def.dtypes, e.g.
 * TENSORD_DTYPE_BIT(TENSORD_DTYPE_F32) | TENSORD_DTYPE_BIT(TENSORD_DTYPE_F64). */
#define TENSORD_DTYPE_BIT(d) (1u << (unsigned)(d))

/* Attribute types. BOOL and INT values travel in tensord_attr.i, FLOAT in .f, STRING in .s. */
typedef enum tensord_attr_type {
  TENSORD_ATTR_BOOL = 0,
  TENSORD_ATTR_INT = 1,
  TENSORD_ATTR_FLOAT = 2,
  TENSORD_ATTR_STRING = 3
} tensord_attr_type;

/* Status codes of every callback (0 = success). Each becomes the matching tensord error
 * reason for the client; any other non-zero value becomes INTERNAL. */
typedef enum tensord_status_code {
  TENSORD_OK = 0,
  TENSORD_ERR_BAD_ATTRIBUTE = 1,      /* BAD_ATTRIBUTE: an attribute value is out of range */
  TENSORD_ERR_SHAPE_MISMATCH = 2,     /* SHAPE_MISMATCH: input shapes do not fit the op */
  TENSORD_ERR_DTYPE_MISMATCH = 3,     /* DTYPE_MISMATCH: an input dtype is not supported */
  TENSORD_ERR_INDEX_OUT_OF_RANGE = 4, /* INDEX_OUT_OF_RANGE: a value used as an index */
  TENSORD_ERR_INVALID = 5,            /* INVALID_REQUEST: any other bad call */
  TENSORD_ERR_INTERNAL = 6            /* INTERNAL: a failure of the plugin itself */
} tensord_status_code;

#define TENSORD_PLUGIN_MAX_MESSAGE 1024
/* Filled by a callback that fails: the code it returns and a message saying what went wrong,
 * with the values (the server prefixes the op name). */
typedef struct tensord_error {
  int32_t code;
  char message[TENSORD_PLUGIN_MAX_MESSAGE]; /* NUL-terminated */
} tensord_error;

/* A tensor as a callback sees it. `shape` has `rank` entries. In shape rules `data` is NULL;
 * in kernels input data is read-only and output data is allocated by the server (uninitialised
 * for forward outputs, zero-filled for gradients). Inputs may alias each other, never an
 * output. */
typedef struct tensord_tensor {
  int32_t dtype; /* tensord_dtype */
  int32_t rank;
  const int64_t* shape;
  void* data;
} tensord_tensor;

/* An output described by a shape rule. */
#define TENSORD_PLUGIN_MAX_RANK 16
typedef struct tensord_meta {
  int32_t dtype; /* tensord_dtype; the server sets -1 and refuses an output left so */
  int32_t rank;  /* 0..TENSORD_PLUGIN_MAX_RANK */
  int64_t shape[TENSORD_PLUGIN_MAX_RANK];
} tensord_meta;

/* An attribute value of a call: every declared attribute, in declaration order, with its
 * default applied when the caller left it out. */
typedef struct tensord_attr {
  const char* name;
  int32_t type;  /* tensord_attr_type */
  int64_t i;     /* BOOL (0/1), INT */
  double f;      /* FLOAT */
  const char* s; /* STRING (NUL-terminated), else NULL */
} tensord_attr;

/* What every callback of one call receives. */
typedef struct tensord_call {
  const tensord_tensor* inputs;
  int32_t num_inputs;
  const tensord_attr* attrs;
  int32_t num_attrs;
  void* user_data; /* tensord_op_def.user_data */
} tensord_call;

/* The shape rule: fill `outputs` (num_outputs entries) from the inputs' dtypes and shapes
 * and the attributes, or fail. It runs before any memory is allocated. */
typedef int32_t (*tensord_shape_fn)(const tensord_call* call, tensord_meta* outputs,
                                    int32_t num_outputs, tensord_error* error);
/* The CPU kernel: compute `outputs` (allocated with the shapes the rule gave). */
typedef int32_t (*tensord_kernel_fn)(const tensord_call* call, tensord_tensor* outputs,
                                     int32_t num_outputs, tensord_error* error);
/* The backward kernel: given the forward's inputs (call->inputs), its outputs and the
 * gradients of the outputs (num_outputs each; zeros for an output that did not reach the
 * root), write the gradients of the inputs into `grad_inputs` (call->num_inputs entries, each
 * with its input's dtype and shape, zero-filled: a gradient the op does not have may be left
 * as it is). */
typedef int32_t (*tensord_backward_fn)(const tensord_call* call, const tensord_tensor* outputs,
                                       const tensord_tensor* grad_outputs, int32_t num_outputs,
                                       tensord_tensor* grad_inputs, tensord_error* error);

typedef struct tensord_attr_spec {
  const char* name;           /* [a-z][a-z0-9_]* */
  int32_t type;               /* tensord_attr_type */
  int32_t required;           /* non-zero: no default; a call must give it */
  int64_t default_int;        /* default of BOOL (0/1) and INT */
  double default_float;       /* default of FLOAT */
  const char* default_string; /* default of STRING (NULL = "") */
} tensord_attr_spec;

#define TENSORD_VARIADIC (-1)

/* One op. Its autodiff marking follows from what is given:
 *   backward set            -> differentiable (the server runs it as the op "<name>_backward")
 *   non_differentiable != 0 -> non-differentiable (outputs are plain tensors under autodiff)
 *   neither                 -> unmarked (an autodiff input fails with
 *                              OPERATION_NOT_MARKED_FOR_AUTODIFF)
 * Giving both is refused. */
typedef struct tensord_op_def {
  const char* name;    /* [a-z][a-z0-9_]*, unique in the server (built-in ops included) */
  const char* doc;     /* one line for ListOps; may be NULL */
  int32_t min_inputs;  /* >= 1 */
  int32_t max_inputs;  /* >= min_inputs, or TENSORD_VARIADIC */
  int32_t num_outputs; /* >= 1 */
  const char* const* input_names; /* num_input_names names for ListOps; may be NULL */
  int32_t num_input_names;
  const tensord_attr_spec* attrs;
  int32_t num_attrs;
  uint32_t dtypes; /* TENSORD_DTYPE_BIT set the first input accepts; 0 = every dtype */
  tensord_shape_fn shape;
  tensord_kernel_fn cpu_kernel;
  tensord_backward_fn backward; /* may be NULL */
  int32_t non_differentiable;
  void* user_data; /* passed to every callback in tensord_call.user_data */
} tensord_op_def;

typedef struct tensord_plugin_registrar tensord_plugin_registrar;
struct tensord_plugin_registrar {
  uint32_t abi_version; /* the server's TENSORD_PLUGIN_ABI_VERSION */
  /* Registers an op; returns TENSORD_OK, or a code with `error` filled for a malformed
   * definition (the server then refuses the whole plugin). */
  int32_t (*register_op)(tensord_plugin_registrar* self, const tensord_op_def* def);
  /* tensord_plugin_init may fill this before returning non-zero, to say why it failed. */
  tensord_error error;
  void* server_state; /* the server's; do not touch */
};

/* The plugin's exports. */
TENSORD_PLUGIN_EXPORT uint32_t tensord_plugin_abi_version(void);
/* Returns 0 on success. May run more than once in a process (once per server started). */
TENSORD_PLUGIN_EXPORT int32_t tensord_plugin_init(tensord_plugin_registrar* registrar);

#define TENSORD_PLUGIN_DEFINE_ABI_VERSION()                         \
  TENSORD_PLUGIN_EXPORT uint32_t tensord_plugin_abi_version(void) { \
    return TENSORD_PLUGIN_ABI_VERSION;                              \
  }

/* Helpers for plugin code. */

/* Sets `error` (printf-style message) and returns `code`, for `return tensord_fail(...)`. */
static inline int32_t tensord_fail(tensord_error* error, int32_t code, const char* format, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline int32_t tensord_fail(tensord_error* error, int32_t code, const char* format, ...) {
  va_list args;
  va_start(args, format);
  error->code = code;
  vsnprintf(error->message, sizeof(error->message), format, args);
  va_end(args);
  return code;
}

/* The attribute named `name` of a call, or NULL. */
static inline const tensord_attr* tensord_find_attr(const tensord_call* call, const char* name) {
  int32_t k;
  for (k = 0; k < call->num_attrs; ++k) {
    if (strcmp(call->attrs[k].name, name) == 0) return &call->attrs[k];
  }
  return NULL;
}

/* Elements of a tensor (1 for rank 0). */
static inline int64_t tensord_numel(const tensord_tensor* t) {
  int64_t n = 1;
  int32_t d;
  for (d = 0; d < t->rank; ++d) n *= t->shape[d];
  return n;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TENSORD_PLUGIN_H_ */
