// f32 math from glibc's vector library (libmvec), for the functions whose scalar libm calls
// dominated the kernels that apply them: tanh took 23 % of a compiled LSTM step's server time
// in libm's tanhf and expm1f. libmvec's 4-lane tanhf is within 1 ulp of the correctly rounded
// value (libm's tanhf: 2) and does 1,024 values in 1.1 us against libm's 10.3 us. Every f32
// tanh of the CPU kernels comes from here, one value or a run at once, so a value has the same
// bits whichever kernel computed it (fused or not).
#pragma once

#include <cstdint>

namespace tensord::cpu::vmath {

float Tanh(float x);
// y[i] = Tanh(x[i]) for i < n.
void Tanh(const float* x, float* y, int64_t n);

}  // namespace tensord::cpu::vmath
