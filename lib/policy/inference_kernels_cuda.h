// CUDA kernels that fuse the small element-wise and row operations of an inference forward
// (RMSNorm, rotary embedding, SiLU-and-multiply), each one launch instead of 3 to 8 ATen ops. They
// round exactly where the ATen sequence they replace rounds (every intermediate the model code
// materialises in the model dtype is rounded to it; products and sums are never fused into FMAs),
// so only the order of RMSNorm's sum of squares differs. A plain C++ interface: the .cu file
// compiles without LibTorch headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace crl::policy::cuda {

enum class ElementType { f32, bf16 };

// out[r, :] = weight * to_dtype(float(x[r, :]) * rsqrt(mean(float(x[r, :])^2) + eps)), rows x hidden,
// contiguous; weight [hidden] in the same type.
void rms_norm(ElementType type, const void* x, const void* weight, void* out, int64_t rows, int64_t hidden, double eps,
              cudaStream_t stream);

// Rotary embedding of x [B, S, H, D] (contiguous) with cos, sin [B, S, D] (contiguous, same type):
// out = to_dtype(x * cos) + to_dtype(rotate_half(x) * sin), rotate_half(x) = cat(-x[D/2:], x[:D/2]).
void rotary(ElementType type, const void* x, const void* cos, const void* sin, void* out, int64_t batch, int64_t steps,
            int64_t heads, int64_t dim, cudaStream_t stream);

// out = to_dtype(silu(gate)) * up, element-wise over n values (silu in fp32: x / (1 + exp(-x))).
void silu_mul(ElementType type, const void* gate, const void* up, void* out, int64_t n, cudaStream_t stream);

}  // namespace crl::policy::cuda
