#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/backends/backend.h"

namespace tensord {

// The OpenCL backend: devices opencl:0, opencl:1, ... (every platform's), kernels generated
// from the op table (server/backends/gpu), one in-order queue per device. `only` limits the
// devices served ("opencl:1"); names of other backends in it are ignored; empty serves all.
std::unique_ptr<Backend> MakeOpenclBackend(const std::vector<std::string>& only);

}  // namespace tensord
