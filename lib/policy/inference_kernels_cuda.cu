// The fused inference kernels (inference_kernels_cuda.h): RMSNorm, rotary embedding, SiLU-and-multiply.
#include "policy/inference_kernels_cuda.h"

#include <cuda_bf16.h>

#include <string>

#include "core/error.h"

namespace crl::policy::cuda {
namespace {

// Loads as float and stores with the type's rounding (round to nearest even for bf16, as ATen).
__device__ __forceinline__ float load(const float* p, int64_t i) { return p[i]; }
__device__ __forceinline__ float load(const __nv_bfloat16* p, int64_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void store(float* p, int64_t i, float v) { p[i] = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }
// The value an ATen op would hold after writing v to a tensor of type T.
__device__ __forceinline__ float round_to(const float*, float v) { return v; }
__device__ __forceinline__ float round_to(const __nv_bfloat16*, float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

constexpr int kNormThreads = 256;

template <typename T>
__global__ void rms_norm_kernel(const T* x, const T* weight, T* out, int64_t hidden, float eps) {
  const int64_t row = blockIdx.x;
  const T* in = x + row * hidden;
  float sum = 0.f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = load(in, i);
    sum = __fadd_rn(sum, __fmul_rn(v, v));
  }
  __shared__ float partial[kNormThreads / 32];
  for (int offset = 16; offset > 0; offset /= 2) sum = __fadd_rn(sum, __shfl_down_sync(0xffffffffu, sum, offset));
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  __shared__ float scale;
  if (threadIdx.x == 0) {
    float total = 0.f;
    for (int w = 0; w < kNormThreads / 32; ++w) total = __fadd_rn(total, partial[w]);
    scale = rsqrtf(__fadd_rn(__fdiv_rn(total, static_cast<float>(hidden)), eps));
  }
  __syncthreads();
  T* o = out + row * hidden;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float normalised = round_to(out, __fmul_rn(load(in, i), scale));
    store(o, i, __fmul_rn(load(weight, i), normalised));
  }
}

template <typename T>
__global__ void rotary_kernel(const T* x, const T* cos, const T* sin, T* out, int64_t total, int64_t heads, int64_t dim) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t d = i % dim;
  const int64_t token = i / (dim * heads);  // b * S + s
  const int64_t half = dim / 2;
  const float v = load(x, i);
  const float rotated = d < half ? -load(x, i + half) : load(x, i - half);
  const float a = round_to(out, __fmul_rn(v, load(cos, token * dim + d)));
  const float b = round_to(out, __fmul_rn(rotated, load(sin, token * dim + d)));
  store(out, i, __fadd_rn(a, b));
}

template <typename T>
__global__ void silu_mul_kernel(const T* gate, const T* up, T* out, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = load(gate, i);
  const float silu = round_to(out, __fdiv_rn(g, __fadd_rn(1.0f, expf(-g))));
  store(out, i, __fmul_rn(silu, load(up, i)));
}

// A failed launch, as every CUDA error in crl: an ApiError naming the call, rank and host
// (compile/cuda_check.h's macro is the same, but policy sits below compile).
void check(const char* what) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    ::crl::throw_api_error("CUDA", what, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e), __FILE__, __LINE__);
  }
}

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

}  // namespace

void rms_norm(ElementType type, const void* x, const void* weight, void* out, int64_t rows, int64_t hidden, double eps,
              cudaStream_t stream) {
  if (rows == 0) return;
  const float e = static_cast<float>(eps);
  if (type == ElementType::f32) {
    rms_norm_kernel<float><<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(
        static_cast<const float*>(x), static_cast<const float*>(weight), static_cast<float*>(out), hidden, e);
  } else {
    rms_norm_kernel<__nv_bfloat16><<<static_cast<unsigned>(rows), kNormThreads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(weight), static_cast<__nv_bfloat16*>(out), hidden, e);
  }
  check("rms_norm kernel");
}

void rotary(ElementType type, const void* x, const void* cos, const void* sin, void* out, int64_t batch, int64_t steps,
            int64_t heads, int64_t dim, cudaStream_t stream) {
  const int64_t total = batch * steps * heads * dim;
  if (total == 0) return;
  constexpr int threads = 256;
  if (type == ElementType::f32) {
    rotary_kernel<float><<<blocks_for(total, threads), threads, 0, stream>>>(
        static_cast<const float*>(x), static_cast<const float*>(cos), static_cast<const float*>(sin), static_cast<float*>(out),
        total, heads, dim);
  } else {
    rotary_kernel<__nv_bfloat16><<<blocks_for(total, threads), threads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(x), static_cast<const __nv_bfloat16*>(cos), static_cast<const __nv_bfloat16*>(sin),
        static_cast<__nv_bfloat16*>(out), total, heads, dim);
  }
  check("rotary kernel");
}

void silu_mul(ElementType type, const void* gate, const void* up, void* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int threads = 256;
  if (type == ElementType::f32) {
    silu_mul_kernel<float><<<blocks_for(n, threads), threads, 0, stream>>>(
        static_cast<const float*>(gate), static_cast<const float*>(up), static_cast<float*>(out), n);
  } else {
    silu_mul_kernel<__nv_bfloat16><<<blocks_for(n, threads), threads, 0, stream>>>(
        static_cast<const __nv_bfloat16*>(gate), static_cast<const __nv_bfloat16*>(up), static_cast<__nv_bfloat16*>(out), n);
  }
  check("silu_mul kernel");
}

}  // namespace crl::policy::cuda
