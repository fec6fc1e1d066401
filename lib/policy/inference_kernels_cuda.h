// CUDA kernels of an inference forward (no autograd): RMSNorm, rotary embedding with the KV cache
// write, SiLU-and-multiply, each one launch instead of 3 to 8 ATen ops; the projections of a few
// rows (decoding) as one bandwidth-bound pass over the weights; attention of one decode step read
// straight from the paged KV cache. The element-wise kernels round exactly where the ATen sequence
// they replace rounds (every intermediate the model code materialises in the model dtype is rounded
// to it; products and sums are never fused into FMAs). The reductions (RMSNorm's sum of squares,
// the projections' and the attention's dot products) accumulate in fp32 in their own order, as
// cuBLAS and SDPA do in theirs. A plain C++ interface: the .cu file compiles without LibTorch headers.
//
// On compute capability 9 and later the kernels launch as programmatic dependent launches: each may
// start while the kernel before it finishes, reading what that kernel does not write (weights, block
// tables) before it waits for it, so a decode step's ~250 kernels do not each pay a launch latency
// and a cold memory round trip. Every kernel before the previous one has finished when a prologue
// runs. CRL_PROGRAMMATIC_LAUNCH=0 (or set_programmatic_launch(false)) launches them plainly: the
// A/B switch, and the results are the same bits either way.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace crl::policy::cuda {

enum class ElementType { f32, bf16 };

// Programmatic dependent launch on or off for the kernels launched after the call (any thread);
// on by default where the GPU has it, off when CRL_PROGRAMMATIC_LAUNCH=0.
void set_programmatic_launch(bool on);
bool programmatic_launch_allowed();
// Within its scope (this thread), kernels launch plainly when `on` is false. The model turns it off
// for forwards of more than kSmallRowsModelLimit rows: there cuBLAS runs the projections,
// and on the H200 (issue 16, batch 64) the kernels that started early beside its GEMMs made a
// decode step slower (2.78 -> 3.06 ms), while at batch 1 they made it faster (1.39 -> 1.34 ms).
class ProgrammaticLaunchScope {
 public:
  explicit ProgrammaticLaunchScope(bool on);
  ~ProgrammaticLaunchScope();
  ProgrammaticLaunchScope(const ProgrammaticLaunchScope&) = delete;
  ProgrammaticLaunchScope& operator=(const ProgrammaticLaunchScope&) = delete;

 private:
  bool outer_;
};

// out[r, :] = weight * to_dtype(float(x[r, :]) * rsqrt(mean(float(x[r, :])^2) + eps)), rows x hidden,
// contiguous; weight [hidden] in the same type.
void rms_norm(ElementType type, const void* x, const void* weight, void* out, int64_t rows, int64_t hidden, double eps,
              cudaStream_t stream);

// sum = to_dtype(x + delta), out = rms_norm(sum): a residual add and the RMSNorm after it.
void add_rms_norm(ElementType type, const void* x, const void* delta, const void* weight, void* sum, void* out, int64_t rows,
                  int64_t hidden, double eps, cudaStream_t stream);

// Rotary embedding of x [B, S, H, D] (contiguous) with cos, sin [B, S, D] (contiguous, same type):
// out = to_dtype(x * cos) + to_dtype(rotate_half(x) * sin), rotate_half(x) = cat(-x[D/2:], x[:D/2]).
void rotary(ElementType type, const void* x, const void* cos, const void* sin, void* out, int64_t batch, int64_t steps,
            int64_t heads, int64_t dim, cudaStream_t stream);

// rotary() of q [T, H, D] and k [T, KVH, D] into q_out and k_out (T tokens, contiguous), and, when
// slots is not null, the rotated keys and v [T, KVH, D] written into the cache pools [*, KVH, D] at
// slots[t] (what index_copy_ would write).
void rotary_qkv(ElementType type, const void* q, const void* k, const void* v, const void* cos, const void* sin, void* q_out,
                void* k_out, const int64_t* slots, void* cache_k, void* cache_v, int64_t tokens, int64_t heads,
                int64_t kv_heads, int64_t dim, cudaStream_t stream);

// One weight of a small-rows projection: out [rows, n] = x [rows, k] weight^T (+ bias), weight [n, k].
struct LinearSegment {
  const void* weight = nullptr;
  const void* bias = nullptr;  // [n] or null
  void* out = nullptr;
  int64_t n = 0;
};
constexpr int kMaxLinearSegments = 3;
// The kernel takes up to 16 rows; the model uses it where it beats cuBLAS and cuBLAS beyond. On the
// H200 (bench_generate's BM_Projection, Qwen2-0.5B's shapes, bf16, GPU time in a CUDA graph, us):
//   rows               1            2            4            8
//   q/k/v (3 weights)  2.0 / 10.4   2.9 / 10.4   4.5 / 10.2   8.1 / 10.2   (crl / cuBLAS)
//   o                  1.9 / 4.4    2.8 / 4.4    4.4 / 4.2    7.9 / 3.5
//   gate/up + silu     6.4 / 12.1   8.4 / 11.9   13.7 / 11.7  28.1 / 11.5
//   down               4.8 / 6.0    6.9 / 6.6    10.4 / 6.6   19.5 / 6.6
// (gate/up's cuBLAS column was timed with ATen's silu, mul and a copy after the GEMMs, three kernels
// where the model's fallback, which the benchmark runs now, has one silu_mul)
// so q/k/v up to kSmallRowsQkvLimit rows, the others (and programmatic launch) up to
// kSmallRowsModelLimit. Its time grows with the rows (each lane reads x once per row and weight).
constexpr int64_t kMaxLinearRows = 16;
constexpr int64_t kSmallRowsModelLimit = 2;
constexpr int64_t kSmallRowsQkvLimit = 8;
// The projections of x by up to kMaxLinearSegments weights in one launch, for rows <= kMaxLinearRows
// (decoding: the weights are read once, with 16-byte loads). Needs k % 8 == 0 and 16-byte aligned
// pointers (small_rows_linear_fits); fp32 accumulation, bias added before the one rounding.
bool small_rows_linear_fits(int64_t rows, int64_t k, const void* x, const LinearSegment* segments, int count);
void small_rows_linear(ElementType type, const void* x, int64_t rows, int64_t k, const LinearSegment* segments, int count,
                       cudaStream_t stream);
// The MLP's gate and up projections and silu_mul of the two in one launch: gate.out [rows, n] =
// silu_mul(x gate^T + gate.bias, x up^T + up.bias), each projection rounded to the type first (as
// at::linear stores it, then silu_mul() rounds), so the [rows, 2n] intermediate is never written;
// up.out is not used. Needs gate.n == up.n and what small_rows_linear_fits needs of both.
void small_rows_gated_linear(ElementType type, const void* x, int64_t rows, int64_t k, const LinearSegment& gate,
                             const LinearSegment& up, cudaStream_t stream);

// Attention of one decode step over the paged cache: q [B, H, D] (rotated), the cache pools
// [*, KVH, D], block_tables [B, blocks] (row b's token j in slot table[j / block_size] * block_size
// + j % block_size), lengths [B] (row b sees its tokens 0 .. lengths[b]-1); out [B, H, D]. Query
// head h reads kv head h / (H / KVH). The keys are split in chunks of paged_attention_chunk_keys(D)
// (32 at D = 64), each chunk one thread block that reads its keys in one memory round trip, and the
// chunks are merged by a second kernel (flash-decoding), so a short sequence costs a round trip and
// a long one at batch 1 still fills the GPU. workspace: paged_attention_workspace_floats() floats.
// The tables, the lengths and every row's keys but its last (this step's) may be read before the
// kernel before this one in the stream has finished: that kernel must not write them.
bool paged_attention_fits(int64_t heads, int64_t kv_heads, int64_t dim);
int64_t paged_attention_chunk_keys(int64_t dim);
int64_t paged_attention_workspace_floats(int64_t batch, int64_t heads, int64_t dim, int64_t key_count);
void paged_decode_attention(ElementType type, const void* q, const void* cache_k, const void* cache_v, const int64_t* block_tables,
                            const int64_t* lengths, void* out, float* workspace, int64_t batch, int64_t heads, int64_t kv_heads,
                            int64_t dim, int64_t blocks, int64_t block_size, float scale, cudaStream_t stream);

// out = to_dtype(silu(gate)) * up, element-wise over n values (silu in fp32: x / (1 + exp(-x))).
void silu_mul(ElementType type, const void* gate, const void* up, void* out, int64_t n, cudaStream_t stream);

}  // namespace crl::policy::cuda
