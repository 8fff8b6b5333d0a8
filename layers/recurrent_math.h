// The recurrent cells' elementwise formulas (PyTorch's nn.LSTM and nn.GRU),
// one definition for the CPU and the CUDA kernels, so both compute the same
// expressions in the same order. Each function is one hidden unit of one
// image at one step; `x` holds the unit's gate values from the input
// projection (x W_ih^T + b_ih) and `h` those of the recurrent one
// (h W_hh^T + b_hh), `stride` apart (the hidden size).
#ifndef SPILL_LAYERS_RECURRENT_MATH_H_
#define SPILL_LAYERS_RECURRENT_MATH_H_

#include <cmath>

#include "layers/activation_math.h"

namespace spill {

// LSTM: i, f, g, o = sigma, sigma, tanh, sigma of x + h;
// c = f c_prev + i g; out = o tanh(c). `saved` (gates then the cell state,
// `stride` apart) receives i, f, g, o and c.
SPILL_HOST_DEVICE inline float LstmForward(const float* x, const float* h, int stride, float c_prev,
                                           float* saved) {
  const float i = Sigmoid(x[0] + h[0]);
  const float f = Sigmoid(x[stride] + h[stride]);
  const float g = tanhf(x[2 * stride] + h[2 * stride]);
  const float o = Sigmoid(x[3 * stride] + h[3 * stride]);
  const float c = f * c_prev + i * g;
  saved[0] = i;
  saved[stride] = f;
  saved[2 * stride] = g;
  saved[3 * stride] = o;
  saved[4 * stride] = c;
  return o * tanhf(c);
}

// LSTM backward for one unit: from the gradient of its output `dh` and of
// its cell state from the step after (`*dc`, replaced by the cell gradient
// of the step before), the gradients of the four pre-activations into `dg`.
SPILL_HOST_DEVICE inline void LstmBackward(const float* saved, int stride, float c_prev, float dh,
                                           float* dc, float* dg) {
  const float i = saved[0], f = saved[stride], g = saved[2 * stride], o = saved[3 * stride];
  const float tc = tanhf(saved[4 * stride]);
  const float dcell = dh * o * (1.0f - tc * tc) + *dc;
  dg[0] = dcell * g * i * (1.0f - i);
  dg[stride] = dcell * c_prev * f * (1.0f - f);
  dg[2 * stride] = dcell * i * (1.0f - g * g);
  dg[3 * stride] = dh * tc * o * (1.0f - o);
  *dc = dcell * f;
}

// GRU: r, z = sigma(x + h); n = tanh(x_n + r h_n); out = (1 - z) n + z h_prev.
// `saved` receives r, z, n and h_n.
SPILL_HOST_DEVICE inline float GruForward(const float* x, const float* h, int stride, float h_prev,
                                          float* saved) {
  const float r = Sigmoid(x[0] + h[0]);
  const float z = Sigmoid(x[stride] + h[stride]);
  const float hn = h[2 * stride];
  const float n = tanhf(x[2 * stride] + r * hn);
  saved[0] = r;
  saved[stride] = z;
  saved[2 * stride] = n;
  saved[3 * stride] = hn;
  return (1.0f - z) * n + z * h_prev;
}

// GRU backward for one unit: the pre-activation gradients of the input
// projection into `dx` and of the recurrent one into `dh_gates` (they differ
// in the new gate, which r scales on the recurrent side); returns the part of
// the previous hidden state's gradient that bypasses W_hh (dh z).
SPILL_HOST_DEVICE inline float GruBackward(const float* saved, int stride, float h_prev, float dh,
                                           float* dx, float* dh_gates) {
  const float r = saved[0], z = saved[stride], n = saved[2 * stride], hn = saved[3 * stride];
  const float dn = dh * (1.0f - z) * (1.0f - n * n);
  const float dr = dn * hn * r * (1.0f - r);
  const float dz = dh * (h_prev - n) * z * (1.0f - z);
  dx[0] = dh_gates[0] = dr;
  dx[stride] = dh_gates[stride] = dz;
  dx[2 * stride] = dn;
  dh_gates[2 * stride] = dn * r;
  return dh * z;
}

}  // namespace spill

#endif  // SPILL_LAYERS_RECURRENT_MATH_H_
