#pragma once

#include <memory>

#include "server/backends/backend.h"

namespace tensord {
// The CPU backend: oneDNN primitives where they apply, loops for the rest.
std::unique_ptr<Backend> MakeCpuBackend();
}  // namespace tensord
