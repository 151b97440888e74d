#pragma once

#include <memory>
#include <string>
#include <vector>

#include "server/backends/backend.h"

namespace tensord {

// The CUDA backend: devices cuda:0, cuda:1, ... on the GPU layer (server/backends/gpu) over the
// CUDA runtime. `only` limits the devices served ("cuda:1"); names of other backends in it are
// ignored; empty serves all. Without a driver or a GPU it serves none.
std::unique_ptr<Backend> MakeCudaBackend(const std::vector<std::string>& only);

}  // namespace tensord
