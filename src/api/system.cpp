#include "krafla/system.h"

#include "kernels/kernels.h"

namespace krafla {

const char* version() { return KRAFLA_VERSION; }
const char* isa_name() { return kernels::isa_name(); }
const char* missing_cpu_feature() { return kernels::missing_cpu_feature(); }
float dot_f32(const float* a, const float* b, int64_t n) { return kernels::dot_f32(a, b, n); }

}  // namespace krafla
