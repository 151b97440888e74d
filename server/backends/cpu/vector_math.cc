#include "server/backends/cpu/vector_math.h"

#include <immintrin.h>

// libmvec's SSE2 variant (x86-64's baseline): each lane is computed on its own, so a value's
// result does not depend on the lanes beside it.
extern "C" __m128 _ZGVbN4v_tanhf(__m128 x);

namespace tensord::cpu::vmath {

float Tanh(float x) { return _mm_cvtss_f32(_ZGVbN4v_tanhf(_mm_set1_ps(x))); }

void Tanh(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _ZGVbN4v_tanhf(_mm_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] = Tanh(x[i]);
}

}  // namespace tensord::cpu::vmath
