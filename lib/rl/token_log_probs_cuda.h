// CUDA kernels behind rl::token_log_probs (token_log_probs.h), with a plain C++ interface so that
// the .cu file compiles without LibTorch headers (nvcc on ATen headers costs tens of seconds).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace crl::rl::cuda {

enum class LogitsType { f32, bf16, f16 };

// One row per block: lse[r] = logsumexp(logits[r, :]) and logp[r] = logits[r, targets[r]] - lse[r]
// in fp32 (online max and sum, one read of the row). Rows are `row_stride` elements apart, the
// vocabulary contiguous. A target outside [0, vocab) gives logp NaN.
void token_log_probs_forward(LogitsType type, const void* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                             const int64_t* targets, float* lse, float* logp, cudaStream_t stream);

// grad_logits[r, j] = grad_logp[r] * ([j == targets[r]] - exp(logits[r, j] - lse[r])), written in
// the logits' type into a contiguous [rows, vocab] buffer.
void token_log_probs_backward(LogitsType type, const void* logits, int64_t rows, int64_t vocab, int64_t row_stride,
                              const int64_t* targets, const float* lse, const float* grad_logp, void* grad_logits,
                              cudaStream_t stream);

}  // namespace crl::rl::cuda
