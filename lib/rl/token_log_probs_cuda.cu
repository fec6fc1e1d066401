// CUDA kernels of rl::token_log_probs: one block per row, the row read once in the forward pass
// (online max and sum) and once in the backward pass, nothing [rows, vocab]-sized in fp32.
#include "rl/token_log_probs_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <string>
#include <type_traits>

#include "compile/cuda_check.h"
#include "core/error.h"

namespace crl::rl::cuda {
namespace {

constexpr int kThreads = 512;

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half(x); }

// (max, sum of exp(x - max)) of two parts combined; an empty part has max -inf and sum 0.
__device__ __forceinline__ void combine(float& m, float& s, float m2, float s2) {
  if (m2 == -INFINITY) return;
  if (m == -INFINITY) {
    m = m2;
    s = s2;
    return;
  }
  const float top = fmaxf(m, m2);
  s = s * expf(m - top) + s2 * expf(m2 - top);
  m = top;
}

template <typename T>
__global__ void __launch_bounds__(kThreads) forward_kernel(const T* __restrict__ logits, int64_t vocab, int64_t row_stride,
                                                           const int64_t* __restrict__ targets, float* __restrict__ lse,
                                                           float* __restrict__ logp) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * row_stride;
  float m = -INFINITY, s = 0.f;
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    const float v = to_float(x[j]);
    if (v == -INFINITY) continue;  // masked-out logit: contributes nothing
    if (v > m) {
      s = (m == -INFINITY ? 0.f : s * expf(m - v)) + 1.f;
      m = v;
    } else {
      s += expf(v - m);
    }
  }
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
    combine(m, s, m2, s2);
  }
  __shared__ float warp_m[kThreads / 32], warp_s[kThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) {
    warp_m[warp] = m;
    warp_s[warp] = s;
  }
  __syncthreads();
  if (warp == 0) {
    m = lane < kThreads / 32 ? warp_m[lane] : -INFINITY;
    s = lane < kThreads / 32 ? warp_s[lane] : 0.f;
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, offset);
      const float s2 = __shfl_xor_sync(0xffffffffu, s, offset);
      combine(m, s, m2, s2);
    }
    if (lane == 0) {
      const float row_lse = m + logf(s);  // all -inf: -inf + log(0) = -inf
      lse[row] = row_lse;
      const int64_t t = targets[row];
      logp[row] = (t >= 0 && t < vocab) ? to_float(x[t]) - row_lse : NAN;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads) backward_kernel(const T* __restrict__ logits, int64_t vocab, int64_t row_stride,
                                                            const int64_t* __restrict__ targets, const float* __restrict__ lse,
                                                            const float* __restrict__ grad_logp, T* __restrict__ grad_logits) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * row_stride;
  T* out = grad_logits + row * vocab;
  const float g = grad_logp[row];
  const float row_lse = lse[row];
  const int64_t t = targets[row];
  for (int64_t j = threadIdx.x; j < vocab; j += kThreads) {
    const float p = g == 0.f ? 0.f : expf(to_float(x[j]) - row_lse);
    out[j] = from_float<T>((j == t ? g : 0.f) - g * p);
  }
}

void check_shape(int64_t rows, int64_t vocab, int64_t row_stride) {
  if (rows < 0 || vocab <= 0 || row_stride < vocab || rows > 0x7fffffff) {
    throw InputError("token_log_probs: bad shape (rows " + std::to_string(rows) + ", vocab " + std::to_string(vocab) +
                     ", row stride " + std::to_string(row_stride) + ")");
  }
}

// Calls launch(T*) with a null pointer of the logits' element type (the kernels' template argument).
template <typename Launch>
void for_element_type(LogitsType type, Launch&& launch) {
  switch (type) {
    case LogitsType::f32: launch(static_cast<float*>(nullptr)); break;
    case LogitsType::bf16: launch(static_cast<__nv_bfloat16*>(nullptr)); break;
    case LogitsType::f16: launch(static_cast<__half*>(nullptr)); break;
  }
}

}  // namespace

void token_log_probs_forward(LogitsType type, const void* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                             const int64_t* targets, float* lse, float* logp, cudaStream_t stream) {
  check_shape(rows, vocab, row_stride);
  if (rows == 0) return;
  for_element_type(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    forward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(static_cast<const T*>(logits), vocab, row_stride,
                                                                        targets, lse, logp);
  });
  CRL_CUDA_CHECK(cudaGetLastError());  // the launch itself (configuration, no device)
}

void token_log_probs_backward(LogitsType type, const void* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                              const int64_t* targets, const float* lse, const float* grad_logp, void* grad_logits,
                              cudaStream_t stream) {
  check_shape(rows, vocab, row_stride);
  if (rows == 0) return;
  for_element_type(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    backward_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(static_cast<const T*>(logits), vocab, row_stride,
                                                                         targets, lse, grad_logp, static_cast<T*>(grad_logits));
  });
  CRL_CUDA_CHECK(cudaGetLastError());
}

}  // namespace crl::rl::cuda
