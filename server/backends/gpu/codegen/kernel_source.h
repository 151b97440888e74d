// Renders the source of generated GPU kernels: elementwise maps (unary, binary, ternary, casts,
// fills) over broadcast operands, and the pieces the other templates (reductions, optimizers)
// share. Shapes and strides are run-time arguments (a geometry buffer), so one kernel serves
// every shape and rank of its (op, dtypes): few variants, each compiled once per process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/core/dtype.h"
#include "server/core/shape.h"

namespace tensord::gpu {

// The C dialect a backend compiles, defined by its runtime (OpenCL C in
// server/backends/opencl); CUDA C (NVRTC) renders through the same templates with its own
// qualifiers.
struct Dialect {
  std::string kernel;             // "__kernel void"
  std::string global;             // "__global"
  std::string global_id;          // "get_global_id(0)"
  std::string int64;              // "long"
  std::string uint64;             // "ulong"
  std::string preamble;           // what every source starts with
  std::string fp64_enable;        // what a source using f64 adds
  std::string as_float, as_uint;  // bit casts between float and uint32
  // Work groups: local memory, the group's and the item's index in it, a barrier.
  std::string local;     // "__local"
  std::string group_id;  // "get_group_id(0)"
  std::string local_id;  // "get_local_id(0)"
  std::string barrier;   // "barrier(CLK_LOCAL_MEM_FENCE)"
  // The type accumulators and wide intermediates compute in (`WIDE` in the templates): double,
  // or float on a device without fp64, where sums are compensated (`WIDE_ADD`).
  std::string wide = "double";
};
// `d` with float as its wide type: the dialect of a device without fp64 (none in hardware, or
// TENSORD_GPU_FP64=off), whose WIDE arguments the host passes as float.
Dialect WithoutFp64(Dialect d);
// What a source whose kernels touch `dtypes` starts with: the dialect's preamble, the f64
// extension, the bf16/f16 conversion helpers, WIDE and WIDE_ADD(sum, compensation, value)
// (plain addition in double; Kahan's compensated addition in float).
std::string Preamble(const Dialect& dialect, const std::vector<DType>& dtypes);

// A map out[i] = expr(a, b, c) over operands loaded as `compute` (`T` in the expression).
// Kernel arguments: out, the inputs, the geometry (int64: the coalesced output shape, then
// each input's strides), n (elements), rank, and one scalar per `num_scalars` (as T). An input
// marked in `by_value` (a number operand) is one value of its storage type instead of a buffer.
struct ElementwiseKernel {
  std::string name;  // the kernel's function name
  std::string expr;
  std::vector<DType> inputs;   // storage dtypes
  std::vector<bool> by_value;  // parallel to inputs (empty: all buffers)
  DType output = DType::kF32;
  DType compute = DType::kF32;
  int num_scalars = 0;
  std::string helpers;  // functions in double the expression calls
};
std::string RenderElementwise(const Dialect& dialect, const ElementwiseKernel& k);
// What the map templates share: the parameters after `out` (each input by value, a number
// operand, or as a buffer; the geometry, n and rank), and the body's start (the item's index
// `i`, returning past n; each input's offset `o<k>` along the geometry; the first
// names.size() inputs loaded as T into `names`).
std::string MapInputParams(const Dialect& dialect, const std::vector<DType>& inputs,
                           const std::vector<bool>& by_value);
std::string MapLoads(const Dialect& dialect, const std::vector<DType>& inputs,
                     const std::vector<bool>& by_value, const std::vector<std::string>& names);

// flag[0] = 1 when any of the n elements of x is zero (every writer writes the same value).
// Arguments: flag (int), x, n. The device-side check of a divisor before an integer division.
std::string RenderAnyZero(const Dialect& dialect, const std::string& name, DType dtype);

// The pieces every template renders with: a dtype's storage type, the type it computes in
// (2-byte floats as float, bool as int), a load converting storage to that type, a store back,
// and the loop adding each operand's offset for the linear `index` over `shape_at` dims.
std::string StorageType(const Dialect& dialect, DType t);
// A name for a dtype's storage, the same in every dialect ("u8" for bool and u8, "u16" for
// bf16 and f16): kernels that only move storage bits are named and cached by it.
std::string StorageTag(DType t);
std::string ComputeType(const Dialect& dialect, DType t);
std::string Load(DType t, const std::string& element);
std::string Store(const Dialect& dialect, DType t, const std::string& value);
std::string OffsetLoop(const std::string& index, const std::string& rank,
                       const std::string& shape_at, const std::vector<std::string>& offsets,
                       const std::vector<std::string>& stride_at, const Dialect& dialect);

// Operand geometry: one iteration shape and, per operand, the element strides that walk it.
// Adjacent dimensions every operand walks contiguously are merged, so same-shape operands
// become one flat loop whatever the rank.
struct Geometry {
  std::vector<int64_t> shape;
  std::vector<std::vector<int64_t>> strides;  // per operand, parallel to shape
  // The kernel's geometry argument: shape, then each operand's strides.
  std::vector<int64_t> Flat() const;
};
// Broadcasting each input shape against `out` (stride 0 along broadcast dimensions).
Geometry BroadcastGeometry(const Shape& out, const std::vector<Shape>& inputs);
// Explicit per-operand strides over `shape` (permute, expand).
Geometry StridedGeometry(const Shape& shape, std::vector<std::vector<int64_t>> strides);
// For a reduction of `in` over `dims` (normalised, ascending): the kept dimensions and the
// reduced ones, each with the input's strides along them.
struct ReductionGeometry {
  Geometry kept;
  Geometry reduced;
};
ReductionGeometry ReduceGeometry(const Shape& in, const std::vector<int64_t>& dims);

}  // namespace tensord::gpu
