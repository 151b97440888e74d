// Fusion of a compiled program's calls, in two passes. First, a matrix product or convolution
// (linear, matmul, conv2d, conv3d) whose output only feeds a chain of pointwise post-ops (adds of a
// bias or a residual, one activation) becomes one call of the fused op (server/ops/fusion.h), where
// the session's device has a kernel for it. The calls it absorbs stay in the program, folded: they
// no longer run, and their outputs exist nowhere, which is why a call is only folded when
// nothing else reads its output (no other call, no root, no keep or fetch).
//
// In a forward that records for autodiff, a chain may only end in an activation that
// differentiates from its output (relu, sigmoid, tanh): the fused op keeps no pre-activation
// value for a backward. Updates and no_grad forwards fuse every activation.
//
// Then trees of pointwise calls (arithmetic, activations, math functions) whose intermediate
// values nobody else reads become fused_elementwise calls (server/ops/elementwise_fusion.h;
// program_elementwise_fusion.cc), in recorded forwards too: the fused call saves its inputs
// alone, and its backward recomputes the values between them and its output.
#pragma once

#include <vector>

#include "server/dispatch/dispatcher.h"
#include "server/service/program.h"
#include "server/service/session.h"

namespace tensord {

// Rewrites `spec` (compiled: `metas` holds each call's outputs, `parameters` what each
// parameter binds) and returns how many fused calls it made. Runs nothing.
int FuseProgramCalls(ProgramSpec& spec, const std::vector<std::vector<TensorMeta>>& metas,
                     const std::vector<ParameterType>& parameters, Session& session,
                     const Dispatcher& dispatcher);
// The second pass alone.
int FuseElementwiseCalls(ProgramSpec& spec, const std::vector<std::vector<TensorMeta>>& metas,
                         const std::vector<ParameterType>& parameters, Session& session,
                         const Dispatcher& dispatcher);

}  // namespace tensord
