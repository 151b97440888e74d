#include "server/backends/cpu/kernel_table.h"

namespace tensord::cpu {

void RegisterOneDnnKernels(KernelTable& t) { (void)t; }

}  // namespace tensord::cpu
