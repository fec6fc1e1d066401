// The judge's one-pass output comparison on the GPU (see compare_values_cuda.h).
#include "worker/compare_values_cuda.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"

namespace crl::worker::cuda {
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

// A block's threads' stats joined, written to partials[blockIdx.x].
__device__ void reduce_block(const CompareStats& local, CompareStats* __restrict__ partials) {
  // Raw storage: a __shared__ array may not have a constructor (CompareStats' members have defaults).
  __shared__ alignas(CompareStats) unsigned char storage[sizeof(CompareStats) * kThreads];
  CompareStats* block = reinterpret_cast<CompareStats*>(storage);
  block[threadIdx.x] = local;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) compare_rule::join(block[threadIdx.x], block[threadIdx.x + half]);
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = block[0];
}

template <typename T>
__global__ void compare_kernel(const T* __restrict__ ref, const T* __restrict__ cand, int64_t n, double atol, double rtol,
                               CompareStats* __restrict__ partials) {
  CompareStats local;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  // Each thread's indices rise, as compare_rule::add_element expects.
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const T r = ref[i], c = cand[i];
    constexpr bool integral = std::is_integral_v<T>;
    if constexpr (integral) {
      if (r == c) continue;
    }
    compare_rule::add_element(local, i, to_double(r), to_double(c), atol, rtol, integral);
  }
  reduce_block(local, partials);
}

// The float64 reference's form: the float32 reference, its error, the candidate (all float32). A
// block's threads take kErrorScaleBlock consecutive elements at each step, so the largest error
// scale among them (compare_rule.h) is one shared-memory reduction; every thread takes every step.
__global__ void compare_float64_kernel(const float* __restrict__ ref, const float* __restrict__ cand, const __nv_bfloat16* __restrict__ delta,
                                       const __nv_bfloat16* __restrict__ scale, int64_t n, double atol, double rtol, double factor,
                                       CompareStats* __restrict__ partials) {
  static_assert(kThreads == kErrorScaleBlock, "one block of threads per block of error scales");
  __shared__ float block_max[kThreads];
  CompareStats local;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x; base < n; base += stride) {
    const int64_t i = base + threadIdx.x;
    const float own = i < n ? fabsf(__bfloat162float(scale[i])) : 0.0f;
    block_max[threadIdx.x] = own;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half) block_max[threadIdx.x] = fmaxf(block_max[threadIdx.x], block_max[threadIdx.x + half]);
      __syncthreads();
    }
    const double neighbours = block_max[0];
    if (i < n) {
      compare_rule::add_element_float64(local, i, static_cast<double>(ref[i]), static_cast<double>(cand[i]), to_double(delta[i]),
                                        static_cast<double>(own), neighbours, atol, rtol, factor);
    }
    __syncthreads();  // block_max[0] read by all before the next step writes it
  }
  reduce_block(local, partials);
}

template <typename T>
void launch(const void* ref, const void* cand, int64_t n, double atol, double rtol, CompareStats* partials, int blocks,
            cudaStream_t stream) {
  compare_kernel<T><<<blocks, kThreads, 0, stream>>>(static_cast<const T*>(ref), static_cast<const T*>(cand), n, atol, rtol, partials);
}

// Sets *differs when any word of a and b differs (a plain store: every writer writes 1). Words of
// 16 bytes where both pointers allow it, bytes otherwise and for the tail.
__global__ void bytes_equal_kernel(const unsigned char* __restrict__ a, const unsigned char* __restrict__ b, uint64_t bytes,
                                   bool wide, uint32_t* differs) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  const uint64_t first = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  bool same = true;
  uint64_t tail = 0;
  if (wide) {
    const uint64_t words = bytes / 16;
    const uint4* wa = reinterpret_cast<const uint4*>(a);
    const uint4* wb = reinterpret_cast<const uint4*>(b);
    for (uint64_t i = first; i < words; i += stride) {
      const uint4 x = wa[i], y = wb[i];
      same &= x.x == y.x && x.y == y.y && x.z == y.z && x.w == y.w;
    }
    tail = words * 16;
  }
  for (uint64_t i = tail + first; i < bytes; i += stride) same &= a[i] == b[i];
  if (!same) *differs = 1;
}

// The blocks' partial results joined on the host (the worst does not depend on the block count).
CompareStats gather(const CompareStats* partials, int blocks, cudaStream_t stream) {
  check(cudaGetLastError(), "launching the output comparison");
  std::vector<CompareStats> host(static_cast<size_t>(blocks));
  check(cudaMemcpyAsync(host.data(), partials, host.size() * sizeof(CompareStats), cudaMemcpyDeviceToHost, stream),
        "copying the comparison's partial results");
  check(cudaStreamSynchronize(stream), "comparing outputs");
  CompareStats total;
  for (const CompareStats& b : host) compare_rule::join(total, b);
  return total;
}

}  // namespace

int compare_blocks(int64_t n) {
  const int64_t wanted = (n + kThreads * 8 - 1) / (kThreads * 8);  // ~8 elements a thread at least
  return static_cast<int>(std::clamp<int64_t>(wanted, 1, kMaxBlocks));
}

CompareStats compare_values(ValueType type, const void* ref, const void* cand, int64_t n, double atol, double rtol,
                            CompareStats* partials, cudaStream_t stream) {
  if (n <= 0) return CompareStats{};
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
  return gather(partials, blocks, stream);
}

CompareStats compare_values_float64(const float* ref, const float* cand, const void* delta, const void* scale, int64_t n, double atol,
                                    double rtol, double factor, CompareStats* partials, cudaStream_t stream) {
  if (n <= 0) return CompareStats{};
  const int blocks = compare_blocks(n);
  compare_float64_kernel<<<blocks, kThreads, 0, stream>>>(ref, cand, static_cast<const __nv_bfloat16*>(delta),
                                                          static_cast<const __nv_bfloat16*>(scale), n, atol, rtol, factor, partials);
  return gather(partials, blocks, stream);
}

bool bytes_equal(const void* a, const void* b, uint64_t bytes, uint32_t* flag, cudaStream_t stream) {
  if (bytes == 0) return true;
  check(cudaMemsetAsync(flag, 0, sizeof(uint32_t), stream), "clearing the input check's flag");
  const bool wide = reinterpret_cast<uintptr_t>(a) % 16 == 0 && reinterpret_cast<uintptr_t>(b) % 16 == 0;
  const uint64_t per_thread = wide ? 16 * 8 : 8;  // ~8 words a thread at least
  const int blocks = static_cast<int>(std::clamp<uint64_t>((bytes + kThreads * per_thread - 1) / (kThreads * per_thread), 1, kMaxBlocks));
  bytes_equal_kernel<<<blocks, kThreads, 0, stream>>>(static_cast<const unsigned char*>(a), static_cast<const unsigned char*>(b), bytes,
                                                     wide, flag);
  check(cudaGetLastError(), "launching the input check");
  uint32_t differs = 0;
  check(cudaMemcpyAsync(&differs, flag, sizeof differs, cudaMemcpyDeviceToHost, stream), "copying the input check's flag");
  check(cudaStreamSynchronize(stream), "checking inputs");
  return differs == 0;
}

}  // namespace crl::worker::cuda
