// The judge's one-pass output comparison on the GPU (see compare_values_cuda.h).
#include "eval/compare_values_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace crl::eval::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxBlocks = 2048;

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw Error(std::string(what) + ": " + cudaGetErrorString(err));
}

__device__ double to_double(__half v) { return static_cast<double>(__half2float(v)); }
__device__ double to_double(__nv_bfloat16 v) { return static_cast<double>(__bfloat162float(v)); }
template <typename T>
__device__ double to_double(T v) {
  return static_cast<double>(v);
}

// The worst of two: the larger excess, the smaller index among equals (as compare_values' add).
__device__ void combine(CompareStats& a, const CompareStats& b) {
  a.bad += b.bad;
  a.max_abs_error = fmax(a.max_abs_error, b.max_abs_error);
  if (b.worst_excess > a.worst_excess || (b.worst_excess == a.worst_excess && b.worst_index >= 0 && b.worst_index < a.worst_index)) {
    a.worst_excess = b.worst_excess;
    a.worst_index = b.worst_index;
    a.worst_reference = b.worst_reference;
    a.worst_candidate = b.worst_candidate;
  }
}

template <typename T>
__global__ void compare_kernel(const T* __restrict__ ref, const T* __restrict__ cand, int64_t n, double atol, double rtol,
                               CompareStats* __restrict__ partials) {
  CompareStats local;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // Each thread's indices rise, so a strictly larger excess keeps the first of equals.
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T r = ref[i], c = cand[i];
    constexpr bool integral = std::is_integral_v<T>;
    if constexpr (integral) {
      if (r == c) continue;
    }
    const double rv = to_double(r), cv = to_double(c);
    double excess;
    const bool r_nan = isnan(rv), c_nan = isnan(cv);
    if (r_nan || c_nan) {
      excess = r_nan && c_nan ? 0.0 : INFINITY;
    } else if (isinf(rv) || isinf(cv)) {
      excess = rv == cv ? 0.0 : INFINITY;
    } else {
      const double err = fabs(__dsub_rn(cv, rv));
      local.max_abs_error = fmax(local.max_abs_error, err);
      // Rounded step by step, as the CPU computes it (no fused multiply-add).
      excess = __ddiv_rn(err, fmax(__dadd_rn(atol, __dmul_rn(rtol, fabs(rv))), 1e-300));
      if constexpr (integral) excess = INFINITY;  // unequal integers
    }
    if (excess > 1.0) ++local.bad;
    if (excess > local.worst_excess) {
      local.worst_excess = excess;
      local.worst_index = i;
      local.worst_reference = rv;
      local.worst_candidate = cv;
    }
  }
  // Raw storage: a __shared__ array may not have a constructor (CompareStats' members have defaults).
  __shared__ alignas(CompareStats) unsigned char storage[sizeof(CompareStats) * kThreads];
  CompareStats* block = reinterpret_cast<CompareStats*>(storage);
  block[threadIdx.x] = local;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) combine(block[threadIdx.x], block[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = block[0];
}

template <typename T>
void launch(const void* ref, const void* cand, int64_t n, double atol, double rtol, CompareStats* partials, int blocks,
            cudaStream_t stream) {
  compare_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(ref), static_cast<const T*>(cand), n, atol, rtol, partials);
}

}  // namespace

int compare_blocks(int64_t n) {
  const int64_t wanted = (n + kThreads * 8 - 1) / (kThreads * 8);  // ~8 elements a thread at least
  return static_cast<int>(std::clamp<int64_t>(wanted, 1, kMaxBlocks));
}

CompareStats compare_values(ValueType type, const void* ref, const void* cand, int64_t n, double atol, double rtol,
                            CompareStats* partials, cudaStream_t stream) {
  CompareStats total;
  if (n <= 0) return total;
  const int blocks = compare_blocks(n);
  switch (type) {
    case ValueType::f16: launch<__half>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
    case ValueType::bf16: launch<__nv_bfloat16>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
    case ValueType::f32: launch<float>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
    case ValueType::f64: launch<double>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
    case ValueType::u8: launch<uint8_t>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
    case ValueType::i8: launch<int8_t>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
    case ValueType::i16: launch<int16_t>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
    case ValueType::i32: launch<int32_t>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
    case ValueType::i64: launch<int64_t>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
    case ValueType::boolean: launch<bool>(ref, cand, n, atol, rtol, partials, blocks, stream); break;
  }
  check(cudaGetLastError(), "launching the output comparison");
  std::vector<CompareStats> host(static_cast<size_t>(blocks));
  check(cudaMemcpyAsync(host.data(), partials, host.size() * sizeof(CompareStats), cudaMemcpyDeviceToHost, stream),
        "copying the comparison's partial results");
  check(cudaStreamSynchronize(stream), "comparing outputs");
  // In block order, by the same rule, so the worst element does not depend on the block count.
  for (const CompareStats& b : host) {
    total.bad += b.bad;
    total.max_abs_error = std::max(total.max_abs_error, b.max_abs_error);
    if (b.worst_excess > total.worst_excess ||
        (b.worst_excess == total.worst_excess && b.worst_index >= 0 && b.worst_index < total.worst_index)) {
      total.worst_excess = b.worst_excess;
      total.worst_index = b.worst_index;
      total.worst_reference = b.worst_reference;
      total.worst_candidate = b.worst_candidate;
    }
  }
  return total;
}

}  // namespace crl::eval::cuda
