// The inference kernels (inference_kernels_cuda.h): RMSNorm, rotary embedding (with the KV cache
// write), SiLU-and-multiply, small-rows projections, paged decode attention.
#include "policy/inference_kernels_cuda.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

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

// Programmatic dependent launch (Hopper and later; inference_kernels_cuda.h): a kernel may start
// while the one before it in the stream still runs. Before wait_for_previous_kernel() it reads only
// what that kernel cannot be writing (weights; the block tables; keys of earlier steps); after it,
// everything the previous kernels wrote is visible. let_next_kernel_start() right after the wait lets
// the next kernel's blocks begin their own prologue, so every kernel before the previous one has
// finished whenever a prologue runs.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void let_next_kernel_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
// Both at a kernel's start: one with no prologue.
__device__ __forceinline__ void start_after_previous_kernel() {
  wait_for_previous_kernel();
  let_next_kernel_start();
}

// silu_mul's value: to_dtype(silu(g)) * u, rounded as the ATen ops round (silu in fp32).
template <typename T>
__device__ __forceinline__ float silu_mul_value(const T* out, float g, float u) {
  const float silu = round_to(out, __fdiv_rn(g, __fadd_rn(1.0f, expf(-g))));
  return round_to(out, __fmul_rn(silu, u));
}

constexpr int kNormThreads = 256;

// With delta (add_rms_norm): the row of x + delta, rounded, is written to residual and normalised.
template <typename T>
__global__ void rms_norm_kernel(const T* x, const T* delta, T* residual, const T* weight, T* out, int64_t hidden, float eps) {
  start_after_previous_kernel();
  const int64_t row = blockIdx.x;
  const T* in = x + row * hidden;
  float sum = 0.f;
  if (delta != nullptr) {
    T* added = residual + row * hidden;
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float v = round_to(added, __fadd_rn(load(in, i), load(delta + row * hidden, i)));
      store(added, i, v);
      sum = __fadd_rn(sum, __fmul_rn(v, v));
    }
    in = added;  // the second pass reads what this thread wrote
  } else {
    for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float v = load(in, i);
      sum = __fadd_rn(sum, __fmul_rn(v, v));
    }
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
  start_after_previous_kernel();
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
__global__ void rotary_qkv_kernel(const T* q, const T* k, const T* v, const T* cos, const T* sin, T* q_out, T* k_out,
                                  const int64_t* slots, T* cache_k, T* cache_v, int64_t total, int64_t heads, int64_t kv_heads,
                                  int64_t dim) {
  start_after_previous_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t q_width = heads * dim, kv_width = kv_heads * dim;
  const int64_t per_token = q_width + 2 * kv_width;
  const int64_t t = i / per_token;
  int64_t e = i % per_token;
  const auto rotate = [&](const T* x, int64_t index, T* out) {
    const int64_t d = index % dim;
    const int64_t half = dim / 2;
    const float value = load(x, index);
    const float rotated = d < half ? -load(x, index + half) : load(x, index - half);
    const float a = round_to(out, __fmul_rn(value, load(cos, t * dim + d)));
    const float b = round_to(out, __fmul_rn(rotated, load(sin, t * dim + d)));
    return __fadd_rn(a, b);
  };
  if (e < q_width) {
    store(q_out, t * q_width + e, rotate(q + t * q_width, e, q_out));
    return;
  }
  e -= q_width;
  if (e < kv_width) {
    const float value = rotate(k + t * kv_width, e, k_out);
    store(k_out, t * kv_width + e, value);
    if (slots != nullptr) store(cache_k, slots[t] * kv_width + e, value);
    return;
  }
  e -= kv_width;
  if (slots != nullptr) cache_v[slots[t] * kv_width + e] = v[t * kv_width + e];
}

// Eight consecutive values (16-byte aligned) as floats.
__device__ __forceinline__ void load8(const float* p, float (&out)[8]) {
  const float4 a = *reinterpret_cast<const float4*>(p);
  const float4 b = *reinterpret_cast<const float4*>(p + 4);
  out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w, out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
}
__device__ __forceinline__ void load8(const __nv_bfloat16* p, float (&out)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

template <typename T>
struct Segments {
  const T* weight[kMaxLinearSegments];
  const T* bias[kMaxLinearSegments];
  T* out[kMaxLinearSegments];
  int64_t n[kMaxLinearSegments];
  int count;
};

constexpr int kLinearWarps = 4;
// Weight loads per lane issued before the wait for the previous kernel (16 bytes each): k up to
// 2,048 per warp of a column, all of Qwen2-0.5B's rows. Longer rows load the rest afterwards.
constexpr int kPrefetchLoads = 8;

// Eight values as loaded (16 bytes of bf16, 32 of fp32), converted to float when used.
template <typename T>
struct Pack8;
template <>
struct Pack8<float> {
  float4 a, b;
};
template <>
struct Pack8<__nv_bfloat16> {
  uint4 raw;
};
__device__ __forceinline__ Pack8<float> load_pack(const float* p) {
  return {reinterpret_cast<const float4*>(p)[0], reinterpret_cast<const float4*>(p)[1]};
}
__device__ __forceinline__ Pack8<__nv_bfloat16> load_pack(const __nv_bfloat16* p) { return {*reinterpret_cast<const uint4*>(p)}; }
__device__ __forceinline__ void unpack(const Pack8<float>& v, float (&out)[8]) {
  out[0] = v.a.x, out[1] = v.a.y, out[2] = v.a.z, out[3] = v.a.w, out[4] = v.b.x, out[5] = v.b.y, out[6] = v.b.z, out[7] = v.b.w;
}
__device__ __forceinline__ void unpack(const Pack8<__nv_bfloat16>& v, float (&out)[8]) {
  const __nv_bfloat162* pairs = reinterpret_cast<const __nv_bfloat162*>(&v.raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(pairs[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

// acc[r][m] += w[r] . x[m, k0 .. k0+7] for the rows and the W weight rows of a column (each x value
// loaded once for all of them).
template <typename T, int MaxRows, int W>
__device__ __forceinline__ void accumulate8(const float (&wv)[W][8], const T* __restrict__ x, int rows, int64_t k, int64_t k0,
                                            float (&acc)[W][MaxRows]) {
#pragma unroll
  for (int m = 0; m < MaxRows; ++m) {
    if (m < rows) {
      float xv[8];
      load8(x + m * k + k0, xv);
#pragma unroll
      for (int r = 0; r < W; ++r) {
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[r][m] = fmaf(wv[r][j], xv[j], acc[r][m]);
      }
    }
  }
}

// One output column per `warps_per_column` warps: their lanes stride over k eight values at a time,
// each weight value read once for all `rows` rows of x; a warp sum, then (split k) the column's
// warps' sums in a fixed order. Long rows (down_proj's k = 4864) are split so that a layer with few
// columns still has enough loads in flight to reach the memory's bandwidth. The weights are loaded
// before the wait for the previous kernel (they are not written during a forward), so their memory
// round trip overlaps that kernel's end.
// GatedOut: segments 0 and 1 are the MLP's gate and up projections (same n); a column reads both
// weight rows and writes silu_mul(gate, up) of its two values to segment 0's out, each value first
// rounded as at::linear would store it, so the MLP's [rows, 2n] intermediate never exists.
template <typename T, int MaxRows, bool GatedOut>
__global__ void __launch_bounds__(kLinearWarps * 32) small_rows_linear_kernel(Segments<T> s, const T* __restrict__ x, int rows,
                                                                              int64_t k, int warps_per_column) {
  constexpr int W = GatedOut ? 2 : 1;  // weight rows per column
  // Loads before the wait: fp32's are twice as wide, and two rows of them would not fit in registers.
  constexpr int P = GatedOut && sizeof(T) == 4 ? kPrefetchLoads / 2 : kPrefetchLoads;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int part = warp % warps_per_column;
  int64_t column = static_cast<int64_t>(blockIdx.x) * (kLinearWarps / warps_per_column) + warp / warps_per_column;
  // The column's segment, with constant indices only (a dynamic index would copy s to local memory).
  const T* weight[W] = {};
  const T* bias[W] = {};
  T* out = nullptr;
  int64_t n = 0;
  if constexpr (GatedOut) {
    if (column < s.n[0]) {
      weight[0] = s.weight[0], weight[1] = s.weight[1], bias[0] = s.bias[0], bias[1] = s.bias[1];
      out = s.out[0], n = s.n[0];
    }
  } else {
#pragma unroll
    for (int i = 0; i < kMaxLinearSegments; ++i) {
      if (i >= s.count || weight[0] != nullptr) continue;
      if (column < s.n[i]) {
        weight[0] = s.weight[i], bias[0] = s.bias[i], out = s.out[i], n = s.n[i];
      } else {
        column -= s.n[i];
      }
    }
  }
  const bool active = weight[0] != nullptr;
  const int64_t first = (part * 32 + lane) * 8, stride = 256 * static_cast<int64_t>(warps_per_column);
  Pack8<T> prefetched[W][P];
#pragma unroll
  for (int r = 0; r < W; ++r) {
#pragma unroll
    for (int c = 0; c < P; ++c) {
      if (active && first + c * stride < k) prefetched[r][c] = load_pack(weight[r] + column * k + first + c * stride);
    }
  }
  wait_for_previous_kernel();
  let_next_kernel_start();
  float acc[W][MaxRows];
#pragma unroll
  for (int r = 0; r < W; ++r) {
#pragma unroll
    for (int m = 0; m < MaxRows; ++m) acc[r][m] = 0.f;
  }
  if (active) {
#pragma unroll
    for (int c = 0; c < P; ++c) {
      if (first + c * stride < k) {
        float wv[W][8];
#pragma unroll
        for (int r = 0; r < W; ++r) unpack(prefetched[r][c], wv[r]);
        accumulate8<T, MaxRows, W>(wv, x, rows, k, first + c * stride, acc);
      }
    }
    for (int64_t k0 = first + P * stride; k0 < k; k0 += stride) {
      float wv[W][8];
#pragma unroll
      for (int r = 0; r < W; ++r) load8(weight[r] + column * k + k0, wv[r]);
      accumulate8<T, MaxRows, W>(wv, x, rows, k, k0, acc);
    }
  }
#pragma unroll
  for (int r = 0; r < W; ++r) {
#pragma unroll
    for (int m = 0; m < MaxRows; ++m) {
      for (int offset = 16; offset > 0; offset /= 2) acc[r][m] += __shfl_xor_sync(0xffffffffu, acc[r][m], offset);
    }
  }
  if (warps_per_column > 1) {
    __shared__ float partial[kLinearWarps][W][MaxRows];
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < W; ++r) {
#pragma unroll
        for (int m = 0; m < MaxRows; ++m) partial[warp][r][m] = acc[r][m];
      }
    }
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int r = 0; r < W; ++r) {
#pragma unroll
      for (int m = 0; m < MaxRows; ++m) {
        acc[r][m] = partial[warp][r][m];
        for (int p = 1; p < warps_per_column; ++p) acc[r][m] += partial[warp + p][r][m];
      }
    }
  }
  if (lane != 0 || !active) return;
  float b[W];
#pragma unroll
  for (int r = 0; r < W; ++r) b[r] = bias[r] != nullptr ? load(bias[r], column) : 0.f;
#pragma unroll
  for (int m = 0; m < MaxRows; ++m) {
    if (m >= rows) continue;
    if constexpr (GatedOut) {
      store(out, m * n + column, silu_mul_value(out, round_to(out, acc[0][m] + b[0]), round_to(out, acc[1][m] + b[1])));
    } else {
      store(out, m * n + column, acc[0][m] + b[0]);
    }
  }
}

constexpr int kAttentionThreads = 128;

constexpr int kAttentionWarps = kAttentionThreads / 32;

// The (max, sum, weighted values) of a softmax over more keys from two parts: a = this lane's,
// b = its partner's. Either may be empty (max -inf).
__device__ __forceinline__ void merge_softmax(float& m, float& l, float (&acc)[8], float m_b, float l_b, const float (&acc_b)[8]) {
  const float top = fmaxf(m, m_b);
  const float wa = top == -INFINITY ? 0.f : expf(m - top);
  const float wb = top == -INFINITY ? 0.f : expf(m_b - top);
  l = l * wa + l_b * wb;
#pragma unroll
  for (int i = 0; i < 8; ++i) acc[i] = acc[i] * wa + acc_b[i] * wb;
  m = top;
}

// One thread block per (chunk of paged_attention_chunk_keys(dim) keys, kv head, row): each lane
// group (dim / 8 lanes, eight values each) reads two keys of the chunk, both loads issued before
// any arithmetic (a chunk is one memory round trip), and keeps a softmax of the two for each of the
// kv head's G query heads; the groups of a warp merge by shuffles, the warps through shared memory
// (G x dim values each), into the chunk's (max, sum, values) in the workspace. Every lane runs the
// same shuffles, so they always see full warps.
template <typename T, int MaxGroup>
__global__ void __launch_bounds__(kAttentionThreads) paged_attention_chunk_kernel(
    const T* __restrict__ q, const T* __restrict__ cache_k, const T* __restrict__ cache_v, const int64_t* __restrict__ tables,
    const int64_t* __restrict__ lengths, float* __restrict__ workspace, int heads, int kv_heads, int dim, int64_t blocks,
    int64_t block_size, float scale, int splits) {
  extern __shared__ float shared[];  // [warps][G][dim] values, then [warps][G] maxima and [warps][G] sums
  const int split = blockIdx.x, kv_head = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int group_size = heads / kv_heads;
  const int lanes = dim / 8;
  const int key_group = threadIdx.x / lanes, sub = threadIdx.x % lanes;
  const int key_groups = kAttentionThreads / lanes;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Before the wait: the tables, the lengths and the keys of earlier steps (header: the kernel
  // before this one writes only this step's key, each row's last).
  const int64_t length = lengths[b];
  const int64_t j0 = static_cast<int64_t>(split) * 2 * key_groups + key_group;
  const int64_t j1 = j0 + key_groups;
  const bool valid0 = j0 < length, valid1 = j1 < length;
  float k0[8] = {}, v0[8] = {}, k1[8] = {}, v1[8] = {};
  const auto offset_of = [&](int64_t j) {
    const int64_t slot = tables[b * blocks + j / block_size] * block_size + j % block_size;
    return (slot * kv_heads + kv_head) * dim + sub * 8;
  };
  const int64_t offset0 = valid0 ? offset_of(j0) : 0, offset1 = valid1 ? offset_of(j1) : 0;
  const bool current0 = j0 == length - 1, current1 = j1 == length - 1;
  if (valid0 && !current0) load8(cache_k + offset0, k0), load8(cache_v + offset0, v0);
  if (valid1 && !current1) load8(cache_k + offset1, k1), load8(cache_v + offset1, v1);
  wait_for_previous_kernel();
  let_next_kernel_start();
  if (current0) load8(cache_k + offset0, k0), load8(cache_v + offset0, v0);
  if (current1) load8(cache_k + offset1, k1), load8(cache_v + offset1, v1);
  float* values = shared;
  float* maxima = shared + kAttentionWarps * group_size * dim;
  float* sums = maxima + kAttentionWarps * group_size;
#pragma unroll
  for (int g = 0; g < MaxGroup; ++g) {
    if (g >= group_size) continue;
    float qv[8];
    load8(q + (b * heads + kv_head * group_size + g) * dim + sub * 8, qv);
    float dot0 = 0.f, dot1 = 0.f;
#pragma unroll
    for (int i = 0; i < 8; ++i) dot0 = fmaf(qv[i], k0[i], dot0), dot1 = fmaf(qv[i], k1[i], dot1);
    for (int o = lanes / 2; o > 0; o /= 2) {
      dot0 += __shfl_xor_sync(0xffffffffu, dot0, o);
      dot1 += __shfl_xor_sync(0xffffffffu, dot1, o);
    }
    const float s0 = valid0 ? dot0 * scale : -INFINITY, s1 = valid1 ? dot1 * scale : -INFINITY;
    float m = fmaxf(s0, s1), l = 0.f, acc[8] = {};
    if (m != -INFINITY) {
      const float p0 = expf(s0 - m), p1 = expf(s1 - m);
      l = p0 + p1;
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] = p0 * v0[i] + p1 * v1[i];
    }
    for (int o = lanes; o < 32; o *= 2) {  // the lane groups of this warp
      float other[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) other[i] = __shfl_xor_sync(0xffffffffu, acc[i], o);
      const float m_other = __shfl_xor_sync(0xffffffffu, m, o), l_other = __shfl_xor_sync(0xffffffffu, l, o);
      merge_softmax(m, l, acc, m_other, l_other, other);
    }
    if (lane < lanes) {  // the warp's first lane group holds the warp's merge
#pragma unroll
      for (int i = 0; i < 8; ++i) values[(warp * group_size + g) * dim + sub * 8 + i] = acc[i];
      if (sub == 0) maxima[warp * group_size + g] = m, sums[warp * group_size + g] = l;
    }
  }
  __syncthreads();
  for (int index = threadIdx.x; index < group_size * dim; index += kAttentionThreads) {
    const int g = index / dim, t = index % dim;
    float top = -INFINITY;
    for (int w = 0; w < kAttentionWarps; ++w) top = fmaxf(top, maxima[w * group_size + g]);
    float sum = 0.f, value = 0.f;
    if (top != -INFINITY) {
      for (int w = 0; w < kAttentionWarps; ++w) {
        const float weight = expf(maxima[w * group_size + g] - top);
        sum += sums[w * group_size + g] * weight;
        value += values[(w * group_size + g) * dim + t] * weight;
      }
    }
    float* out = workspace + ((b * heads + kv_head * group_size + g) * splits + split) * (dim + 2);
    out[2 + t] = value;
    if (t == 0) out[0] = top, out[1] = sum;
  }
}

// Merges the chunks of one (row, query head): out = sum_c values_c e^(max_c - M) / sum_c sum_c e^(max_c - M).
template <typename T>
__global__ void paged_attention_merge_kernel(const float* __restrict__ workspace, T* out, int dim, int splits) {
  start_after_previous_kernel();
  const int64_t row_head = blockIdx.x;
  const float* chunks = workspace + row_head * splits * (dim + 2);
  float top = -INFINITY;
  for (int c = 0; c < splits; ++c) top = fmaxf(top, chunks[c * (dim + 2)]);
  for (int t = threadIdx.x; t < dim; t += blockDim.x) {
    float sum = 0.f, value = 0.f;
    if (top != -INFINITY) {
      for (int c = 0; c < splits; ++c) {
        const float weight = expf(chunks[c * (dim + 2)] - top);
        sum += chunks[c * (dim + 2) + 1] * weight;
        value += chunks[c * (dim + 2) + 2 + t] * weight;
      }
    }
    store(out, row_head * dim + t, sum > 0.f ? value / sum : 0.f);
  }
}

template <typename T>
__global__ void silu_mul_kernel(const T* gate, const T* up, T* out, int64_t n) {
  start_after_previous_kernel();
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  store(out, i, silu_mul_value(out, load(gate, i), load(up, i)));
}

unsigned blocks_for(int64_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

// Whether kernels launch as programmatic dependent launches (set_programmatic_launch), and the
// compute capability major of each device (0: not asked yet).
std::atomic<bool> programmatic_launch_on{[] {
  const char* v = std::getenv("CRL_PROGRAMMATIC_LAUNCH");
  return v == nullptr || std::string(v) != "0";
}()};
std::array<std::atomic<int>, 64> major_of_device{};

thread_local bool programmatic_launch_in_scope = true;  // ProgrammaticLaunchScope's setting

bool programmatic_launch() {
  if (!programmatic_launch_on.load(std::memory_order_relaxed) || !programmatic_launch_in_scope) return false;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= static_cast<int>(major_of_device.size())) return false;
  if (major_of_device[device].load(std::memory_order_relaxed) == 0) {
    int major = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    major_of_device[device].store(std::max(major, 1), std::memory_order_relaxed);
  }
  return major_of_device[device].load(std::memory_order_relaxed) >= 9;
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...), as a programmatic dependent launch where
// it applies. A failed launch is an ApiError naming `what`, the rank and host, as every CUDA error in
// crl (compile/cuda_check.h's macro is the same, but policy sits below compile).
template <typename... Params, typename... Args>
void launch(const char* what, void (*kernel)(Params...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
            Args&&... args) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = programmatic_launch() ? 1 : 0;
  const cudaError_t e = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();  // a launch error is not sticky: clear it so later calls do not report it again
    ::crl::throw_api_error("CUDA", what, std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e), __FILE__, __LINE__);
  }
}

// f(null pointer of the element type): float or __nv_bfloat16.
template <typename F>
void with_element_type(ElementType type, F&& f) {
  if (type == ElementType::f32) {
    f(static_cast<float*>(nullptr));
  } else {
    f(static_cast<__nv_bfloat16*>(nullptr));
  }
}

}  // namespace

void set_programmatic_launch(bool on) { programmatic_launch_on.store(on); }
bool programmatic_launch_allowed() { return programmatic_launch_on.load(); }

ProgrammaticLaunchScope::ProgrammaticLaunchScope(bool on) : outer_(programmatic_launch_in_scope) {
  programmatic_launch_in_scope = outer_ && on;
}
ProgrammaticLaunchScope::~ProgrammaticLaunchScope() { programmatic_launch_in_scope = outer_; }

void rms_norm(ElementType type, const void* x, const void* weight, void* out, int64_t rows, int64_t hidden, double eps,
              cudaStream_t stream) {
  if (rows == 0) return;
  with_element_type(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    launch("rms_norm kernel", rms_norm_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(kNormThreads), 0, stream,
           static_cast<const T*>(x), static_cast<const T*>(nullptr), static_cast<T*>(nullptr), static_cast<const T*>(weight),
           static_cast<T*>(out), hidden, static_cast<float>(eps));
  });
}

void add_rms_norm(ElementType type, const void* x, const void* delta, const void* weight, void* sum, void* out, int64_t rows,
                  int64_t hidden, double eps, cudaStream_t stream) {
  if (rows == 0) return;
  with_element_type(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    launch("add_rms_norm kernel", rms_norm_kernel<T>, dim3(static_cast<unsigned>(rows)), dim3(kNormThreads), 0, stream,
           static_cast<const T*>(x), static_cast<const T*>(delta), static_cast<T*>(sum), static_cast<const T*>(weight),
           static_cast<T*>(out), hidden, static_cast<float>(eps));
  });
}

void rotary(ElementType type, const void* x, const void* cos, const void* sin, void* out, int64_t batch, int64_t steps,
            int64_t heads, int64_t dim, cudaStream_t stream) {
  const int64_t total = batch * steps * heads * dim;
  if (total == 0) return;
  constexpr int threads = 256;
  with_element_type(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    launch("rotary kernel", rotary_kernel<T>, dim3(blocks_for(total, threads)), dim3(threads), 0, stream, static_cast<const T*>(x),
           static_cast<const T*>(cos), static_cast<const T*>(sin), static_cast<T*>(out), total, heads, dim);
  });
}

void rotary_qkv(ElementType type, const void* q, const void* k, const void* v, const void* cos, const void* sin, void* q_out,
                void* k_out, const int64_t* slots, void* cache_k, void* cache_v, int64_t tokens, int64_t heads,
                int64_t kv_heads, int64_t dim, cudaStream_t stream) {
  const int64_t total = tokens * (heads + 2 * kv_heads) * dim;
  if (total == 0) return;
  constexpr int threads = 256;
  with_element_type(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    launch("rotary_qkv kernel", rotary_qkv_kernel<T>, dim3(blocks_for(total, threads)), dim3(threads), 0, stream,
           static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), static_cast<const T*>(cos),
           static_cast<const T*>(sin), static_cast<T*>(q_out), static_cast<T*>(k_out), slots, static_cast<T*>(cache_k),
           static_cast<T*>(cache_v), total, heads, kv_heads, dim);
  });
}

bool small_rows_linear_fits(int64_t rows, int64_t k, const void* x, const LinearSegment* segments, int count) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (rows < 1 || rows > kMaxLinearRows || k < 8 || k % 8 != 0 || count < 1 || count > kMaxLinearSegments || !aligned(x)) {
    return false;
  }
  for (int i = 0; i < count; ++i) {
    if (!aligned(segments[i].weight) || segments[i].n < 1) return false;
  }
  return true;
}

namespace {

// Launches the kernel for `columns` output columns, its row count rounded up to an instantiation.
template <bool GatedOut>
void launch_small_rows_linear(ElementType type, const void* x, int64_t rows, int64_t k, const LinearSegment* segments, int count,
                              int64_t columns, cudaStream_t stream) {
  const int warps_per_column = k >= 4096 ? 4 : k >= 2048 ? 2 : 1;
  const dim3 grid(blocks_for(columns, kLinearWarps / warps_per_column));
  with_element_type(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    Segments<T> s{};
    s.count = count;
    for (int i = 0; i < count; ++i) {
      s.weight[i] = static_cast<const T*>(segments[i].weight);
      s.bias[i] = static_cast<const T*>(segments[i].bias);
      s.out[i] = static_cast<T*>(segments[i].out);
      s.n[i] = segments[i].n;
    }
    const auto run = [&](auto kernel) {
      launch("small_rows_linear kernel", kernel, grid, dim3(kLinearWarps * 32), 0, stream, s, static_cast<const T*>(x),
             static_cast<int>(rows), k, warps_per_column);
    };
    if (rows <= 1) {
      run(small_rows_linear_kernel<T, 1, GatedOut>);
    } else if (rows <= 2) {
      run(small_rows_linear_kernel<T, 2, GatedOut>);
    } else if (rows <= 4) {
      run(small_rows_linear_kernel<T, 4, GatedOut>);
    } else if (rows <= 8) {
      run(small_rows_linear_kernel<T, 8, GatedOut>);
    } else {
      run(small_rows_linear_kernel<T, 16, GatedOut>);
    }
  });
}

}  // namespace

void small_rows_linear(ElementType type, const void* x, int64_t rows, int64_t k, const LinearSegment* segments, int count,
                       cudaStream_t stream) {
  if (!small_rows_linear_fits(rows, k, x, segments, count)) throw Error("small_rows_linear: shapes or alignment it does not take");
  int64_t columns = 0;
  for (int i = 0; i < count; ++i) columns += segments[i].n;
  launch_small_rows_linear<false>(type, x, rows, k, segments, count, columns, stream);
}

void small_rows_gated_linear(ElementType type, const void* x, int64_t rows, int64_t k, const LinearSegment& gate,
                             const LinearSegment& up, cudaStream_t stream) {
  const LinearSegment segments[2] = {gate, up};
  if (!small_rows_linear_fits(rows, k, x, segments, 2) || gate.n != up.n || gate.out == nullptr) {
    throw Error("small_rows_gated_linear: shapes or alignment it does not take");
  }
  launch_small_rows_linear<true>(type, x, rows, k, segments, 2, gate.n, stream);
}

bool paged_attention_fits(int64_t heads, int64_t kv_heads, int64_t dim) {
  if (kv_heads < 1 || heads % kv_heads != 0 || heads / kv_heads > 16) return false;
  // dim / 8 lanes per key: a power of two within a warp; the warps' merge (G x dim per warp) within
  // the 48 KiB of shared memory a launch gets without opting in.
  return dim % 8 == 0 && dim / 8 <= 32 && ((dim / 8) & (dim / 8 - 1)) == 0 && (heads / kv_heads) * dim <= 2048;
}

int64_t paged_attention_chunk_keys(int64_t dim) { return 2 * kAttentionThreads / (dim / 8); }

int64_t paged_attention_workspace_floats(int64_t batch, int64_t heads, int64_t dim, int64_t key_count) {
  const int64_t chunk_keys = paged_attention_chunk_keys(dim);
  const int64_t splits = (key_count + chunk_keys - 1) / chunk_keys;
  return batch * heads * splits * (dim + 2);
}

void paged_decode_attention(ElementType type, const void* q, const void* cache_k, const void* cache_v, const int64_t* block_tables,
                            const int64_t* lengths, void* out, float* workspace, int64_t batch, int64_t heads, int64_t kv_heads,
                            int64_t dim, int64_t blocks, int64_t block_size, float scale, cudaStream_t stream) {
  if (!paged_attention_fits(heads, kv_heads, dim)) throw Error("paged_decode_attention: a head layout it does not take");
  if (batch == 0) return;
  const int64_t chunk_keys = paged_attention_chunk_keys(dim);
  const int64_t splits = (blocks * block_size + chunk_keys - 1) / chunk_keys;
  const int64_t group_size = heads / kv_heads;
  const size_t shared_bytes = sizeof(float) * static_cast<size_t>(kAttentionWarps * group_size * (dim + 2));
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(kv_heads), static_cast<unsigned>(batch));
  with_element_type(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    const auto chunk = [&](auto kernel) {
      launch("paged attention kernel", kernel, grid, dim3(kAttentionThreads), shared_bytes, stream, static_cast<const T*>(q),
             static_cast<const T*>(cache_k), static_cast<const T*>(cache_v), block_tables, lengths, workspace,
             static_cast<int>(heads), static_cast<int>(kv_heads), static_cast<int>(dim), blocks, block_size, scale,
             static_cast<int>(splits));
    };
    if (group_size <= 1) {
      chunk(paged_attention_chunk_kernel<T, 1>);
    } else if (group_size <= 2) {
      chunk(paged_attention_chunk_kernel<T, 2>);
    } else if (group_size <= 4) {
      chunk(paged_attention_chunk_kernel<T, 4>);
    } else if (group_size <= 8) {
      chunk(paged_attention_chunk_kernel<T, 8>);
    } else {
      chunk(paged_attention_chunk_kernel<T, 16>);
    }
    launch("paged attention merge kernel", paged_attention_merge_kernel<T>, dim3(static_cast<unsigned>(batch * heads)), dim3(64),
           0, stream, static_cast<const float*>(workspace), static_cast<T*>(out), static_cast<int>(dim), static_cast<int>(splits));
  });
}

void silu_mul(ElementType type, const void* gate, const void* up, void* out, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int threads = 256;
  with_element_type(type, [&](auto* typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    launch("silu_mul kernel", silu_mul_kernel<T>, dim3(blocks_for(n, threads)), dim3(threads), 0, stream,
           static_cast<const T*>(gate), static_cast<const T*>(up), static_cast<T*>(out), n);
  });
}

}  // namespace crl::policy::cuda
