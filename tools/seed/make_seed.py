#!/usr/bin/env python3
"""Writes the default job's seed data (jobs/data/seed/) from the program families below.

Every task gets several correct CPU programs of clearly different speed (a naive loop, another
ATen formulation, a fused OpenMP/SIMD pass or an algebraically simpler form) and one CUDA
program, each wrapped in a completion of the three parts the job's prompt asks for (analysis,
plan, the program in one fenced block; lib/rl/prompt.cpp).

  tools/seed/make_seed.py --out jobs/data/seed               # writes cpu_raw.jsonl, cuda.jsonl
  build/apps/crl/crl data validate jobs/data/seed/cpu_raw.jsonl \\
      --out jobs/data/seed/cpu.jsonl --backend cpu --cpu-threads 1 --trials 2 --time-budget 0.3

(14 tasks' programs were measured later, with --time-budget 1, and merged in cpu_raw.jsonl's
order.) cpu_default.jsonl is cpu.jsonl's lines of the default job's tasks (jobs/default.yaml's
tasks.ids), its SFT data; cuda_default.jsonl (written here) is cuda.jsonl's lines of those tasks,
the SFT data of the default job on a GPU (a one-block kernel, the ATen call, the full-grid kernel).

cpu.jsonl (validate's output: {task, completion, speedup, id}) is what the job trains on; its
speedups were measured on the CPU backend at small scale with one intra-op thread, as each rank of
the default job on two cores has (with LibTorch's default of all cores on a loaded machine the
reference's threads wait on each other and the speedups mean nothing). cuda.jsonl holds the CUDA programs
({task, completion, id, backend: "cuda"}) and the CPU programs that are ATen calls only (backend
"any": they run on both backends), the SFT data of a GPU run: they compile on a machine with nvcc
(tests/default seed_cuda_compile) and are validated on a GPU with
`crl data validate jobs/data/seed/cuda.jsonl --backend cuda`.
"""
import argparse
import json
import os
import re


def completion(analysis, plan, program):
    return f"1. Performance analysis: {analysis}\n\n2. Plan: {plan}\n\n3. The program:\n\n```\n{program.strip()}\n```\n"


# ---- elementwise maps: y[i] = f(x[i]) ----------------------------------------------------------

# task: (argument name, C++ expression of float v, another ATen formulation, CUDA expression of v)
UNARY = {
    "level1/005_matrix_scalar_mul": ("A", "v * 3.14f", "at::mul(A, 3.14)", "v * 3.14f"),
    "level1/019_relu": ("x", "v > 0.0f ? v : 0.0f", "at::clamp_min(x, 0)", "fmaxf(v, 0.0f)"),
    "level1/020_leaky_relu": ("x", "v > 0.0f ? v : 0.01f * v", "at::where(x > 0, x, x * 0.01)", "v > 0.0f ? v : 0.01f * v"),
    "level1/021_sigmoid": ("x", "1.0f / (1.0f + std::exp(-v))", "1 / (1 + at::exp(-x))", "1.0f / (1.0f + expf(-v))"),
    "level1/022_tanh": ("x", "std::tanh(v)", "2 * at::sigmoid(2 * x) - 1", "tanhf(v)"),
    "level1/025_swish": ("x", "v / (1.0f + std::exp(-v))", "at::silu(x)", "v / (1.0f + expf(-v))"),
    "level1/026_gelu": ("x", "0.5f * v * (1.0f + std::erf(v * 0.70710678f))", "0.5 * x * (1 + at::erf(x * M_SQRT1_2))",
                        "0.5f * v * (1.0f + erff(v * 0.70710678f))"),
    "level1/027_selu": ("x", "1.0507009873554805f * (v > 0.0f ? v : 1.6732632423543772f * std::expm1(v))",
                        "1.0507009873554805 * at::where(x > 0, x, 1.6732632423543772 * at::expm1(x))",
                        "1.0507009873554805f * (v > 0.0f ? v : 1.6732632423543772f * expm1f(v))"),
    "level1/028_hardsigmoid": ("x", "std::fmin(std::fmax(v / 6.0f + 0.5f, 0.0f), 1.0f)", "at::clamp(x / 6 + 0.5, 0, 1)",
                               "fminf(fmaxf(v / 6.0f + 0.5f, 0.0f), 1.0f)"),
    "level1/029_softplus": ("x", "v > 20.0f ? v : std::log1p(std::exp(v))", "at::where(x > 20, x, at::log1p(at::exp(x)))",
                            "v > 20.0f ? v : log1pf(expf(v))"),
    "level1/030_softsign": ("x", "v / (1.0f + std::fabs(v))", "x.div(x.abs().add_(1))", "v / (1.0f + fabsf(v))"),
    "level1/031_elu": ("x", "v > 0.0f ? v : std::expm1(v)", "at::where(x > 0, x, at::expm1(x))", "v > 0.0f ? v : expm1f(v)"),
    "level1/032_hardtanh": ("x", "std::fmin(std::fmax(v, -1.0f), 1.0f)", "at::clamp(x, -1, 1)", "fminf(fmaxf(v, -1.0f), 1.0f)"),
    "level1/088_min_gpt_new_gelu": ("x", "0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)))",
                                    "at::gelu(x, \"tanh\")",
                                    "0.5f * v * (1.0f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)))"),
}


def unary_programs(task, arg, c_expr, aten, cuda_expr):
    naive = f"""
// crl:host
at::Tensor forward(const at::Tensor& {arg}) {{
  at::Tensor y = at::empty_like({arg});
  auto in = {arg}.accessor<float, 2>();
  auto out = y.accessor<float, 2>();
  for (int64_t j = 0; j < {arg}.size(1); ++j) {{
    for (int64_t i = 0; i < {arg}.size(0); ++i) {{
      const float v = in[i][j];
      out[i][j] = {c_expr};
    }}
  }}
  return y;
}}"""
    other = f"""
// crl:host
at::Tensor forward(const at::Tensor& {arg}) {{ return {aten}; }}"""
    fused = f"""
// crl:device
extern "C" void map_cpu(const float* x, float* y, int64_t n) {{
#pragma omp parallel for simd
  for (int64_t i = 0; i < n; ++i) {{
    const float v = x[i];
    y[i] = {c_expr};
  }}
}}
// crl:host
extern "C" void map_cpu(const float* x, float* y, int64_t n);
at::Tensor forward(const at::Tensor& {arg}) {{
  const at::Tensor in = {arg}.contiguous();
  at::Tensor y = at::empty_like(in);
  map_cpu(in.data_ptr<float>(), y.data_ptr<float>(), in.numel());
  return y;
}}"""
    cuda = f"""
// crl:device
__global__ void map_kernel(const float* x, float* y, int64_t n) {{
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {{
    const float v = x[i];
    y[i] = {cuda_expr};
  }}
}}
extern "C" void launch_map(const float* x, float* y, int64_t n, cudaStream_t stream) {{
  map_kernel<<<1056, 256, 0, stream>>>(x, y, n);
}}
// crl:host
extern "C" void launch_map(const float* x, float* y, int64_t n, cudaStream_t stream);
at::Tensor forward(const at::Tensor& {arg}) {{
  const at::Tensor in = {arg}.contiguous();
  at::Tensor y = at::empty_like(in);
  launch_map(in.data_ptr<float>(), y.data_ptr<float>(), in.numel(), at::cuda::getCurrentCUDAStream());
  return y;
}}"""
    # The GPU's naive program: one block of threads strides over the whole tensor (a few percent of
    # the H200's SMs busy), so the GPU default job's policy has a slow program to move away from.
    cuda_naive = cuda.replace("map_kernel<<<1056, 256, 0, stream>>>", "map_kernel<<<1, 256, 0, stream>>>")
    return [
        ("naive", naive, "the reference is one ATen call per element-wise operation, each a full pass over memory.",
         "a plain loop over the elements, column by column."),
        ("aten", other, "the reference's ATen calls each read and write the whole tensor.",
         f"compute it as {aten}."),
        ("fused", fused, "every ATen call of the reference is a separate pass with its own temporary.",
         "one fused OpenMP SIMD pass over contiguous memory, no temporaries."),
    ], [("cuda_naive", cuda_naive, "the reference is a library call; a kernel of its own is simpler to follow.",
          "one block of threads striding over every element."),
        ("cuda", cuda, "the reference launches one kernel per operation.", "one fused grid-stride kernel.")]


# ---- reductions over dim 1 of [batch, dim1, dim2] ----------------------------------------------

# task: (init, combine(acc, v), finish(acc, n), ATen formulation, keepdim)
REDUCE = {
    "level1/047_sum_reduction": ("0.0f", "acc + v", "acc", "at::matmul(at::ones({1, x.size(1)}, x.options()), x)", True),
    "level1/048_mean_reduction": ("0.0f", "acc + v", "acc / n", "at::matmul(at::full({1, x.size(1)}, 1.0 / x.size(1), x.options()), x).squeeze(1)", False),
    "level1/049_max_reduction": ("-INFINITY", "std::fmax(acc, v)", "acc", "at::amax(x, {1})", False),
    "level1/053_min_reduction": ("INFINITY", "std::fmin(acc, v)", "acc", "at::amin(x, {1})", False),
}
CUDA_COMBINE = {"acc + v": "acc + v", "std::fmax(acc, v)": "fmaxf(acc, v)", "std::fmin(acc, v)": "fminf(acc, v)"}


def reduce_programs(task, init, combine, finish, aten, keepdim):
    shape = "{x.size(0), 1, x.size(2)}" if keepdim else "{x.size(0), x.size(2)}"
    naive = f"""
// crl:host
at::Tensor forward(const at::Tensor& x) {{
  at::Tensor y = at::empty({shape}, x.options());
  auto in = x.accessor<float, 3>();
  float* out = y.data_ptr<float>();
  const int64_t n = x.size(1);
  for (int64_t b = 0; b < x.size(0); ++b) {{
    for (int64_t j = 0; j < x.size(2); ++j) {{
      float acc = {init};
      for (int64_t i = 0; i < n; ++i) {{
        const float v = in[b][i][j];
        acc = {combine};
      }}
      out[b * x.size(2) + j] = {finish};
    }}
  }}
  return y;
}}"""
    other = f"""
// crl:host
at::Tensor forward(const at::Tensor& x) {{ return {aten}; }}"""
    fused = f"""
// crl:device
#include <vector>
extern "C" void reduce_cpu(const float* x, float* y, int64_t batch, int64_t n, int64_t m) {{
#pragma omp parallel for
  for (int64_t b = 0; b < batch; ++b) {{
    std::vector<float> row(m, {init});
    for (int64_t i = 0; i < n; ++i) {{
      const float* in = x + (b * n + i) * m;
#pragma omp simd
      for (int64_t j = 0; j < m; ++j) {{
        const float acc = row[j], v = in[j];
        row[j] = {combine};
      }}
    }}
    for (int64_t j = 0; j < m; ++j) {{
      const float acc = row[j];
      y[b * m + j] = {finish};
    }}
  }}
}}
// crl:host
extern "C" void reduce_cpu(const float* x, float* y, int64_t batch, int64_t n, int64_t m);
at::Tensor forward(const at::Tensor& x) {{
  const at::Tensor in = x.contiguous();
  at::Tensor y = at::empty({shape}, x.options());
  reduce_cpu(in.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), x.size(2));
  return y;
}}"""
    cuda = f"""
// crl:device
__global__ void reduce_kernel(const float* x, float* y, int64_t batch, int64_t n, int64_t m) {{
  const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (k >= batch * m) return;
  const int64_t b = k / m, j = k % m;
  float acc = {init};
  for (int64_t i = 0; i < n; ++i) {{
    const float v = x[(b * n + i) * m + j];
    acc = {CUDA_COMBINE[combine]};
  }}
  y[k] = {finish};
}}
extern "C" void reduce(const float* x, float* y, int64_t batch, int64_t n, int64_t m, cudaStream_t stream) {{
  reduce_kernel<<<(unsigned)((batch * m + 255) / 256), 256, 0, stream>>>(x, y, batch, n, m);
}}
// crl:host
extern "C" void reduce(const float* x, float* y, int64_t batch, int64_t n, int64_t m, cudaStream_t stream);
at::Tensor forward(const at::Tensor& x) {{
  const at::Tensor in = x.contiguous();
  at::Tensor y = at::empty({shape}, x.options());
  reduce(in.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), x.size(2), at::cuda::getCurrentCUDAStream());
  return y;
}}"""
    return [
        ("naive", naive, "the reduced dimension is the middle one, so each output reads a strided column.",
         "a plain loop per output over the reduced dimension."),
        ("aten", other, "the reference reduces a strided dimension.", f"compute it as {aten}."),
        ("fused", fused, "the reduced dimension is strided, but the last one is contiguous.",
         "per batch, accumulate whole contiguous rows with OpenMP SIMD, one read of the input."),
    ], [("cuda", cuda, "one output per thread reads a column; neighbouring threads read neighbouring floats.",
        "one thread per output, coalesced loads along the last dimension.")]


# ---- losses: a scalar mean over [batch, dim] ---------------------------------------------------

# task: (term of p and t as C++ floats, ATen formulation, index of t)
LOSS = {
    "level1/094_mse_loss": ("(p - t) * (p - t)", "at::mse_loss(predictions, targets)", "i"),
    "level1/096_huber_loss": ("std::fabs(p - t) < 1.0f ? 0.5f * (p - t) * (p - t) : std::fabs(p - t) - 0.5f",
                              "at::huber_loss(predictions, targets)", "i"),
    "level1/100_hinge_loss": ("std::fmax(1.0f - p * t, 0.0f)", "at::relu(1 - predictions * targets).mean()", "i % dim"),
}


def loss_programs(task, term, aten, t_index):
    cuda_term = term.replace("std::fabs", "fabsf").replace("std::fmax", "fmaxf")
    naive = f"""
// crl:host
at::Tensor forward(const at::Tensor& predictions, const at::Tensor& targets) {{
  const at::Tensor pc = predictions.contiguous(), tc = targets.contiguous();
  const float* pp = pc.data_ptr<float>();
  const float* tp = tc.data_ptr<float>();
  const int64_t n = pc.numel(), dim = pc.size(1);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {{
    const float p = pp[i], t = tp[{t_index}];
    sum += {term};
  }}
  return at::scalar_tensor(sum / n, predictions.options());
}}"""
    other = f"""
// crl:host
at::Tensor forward(const at::Tensor& predictions, const at::Tensor& targets) {{ return {aten}; }}"""
    fused = f"""
// crl:device
extern "C" double loss_sum_cpu(const float* pp, const float* tp, int64_t n, int64_t dim) {{
  double sum = 0.0;
#pragma omp parallel for simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) {{
    const float p = pp[i], t = tp[{t_index}];
    sum += {term};
  }}
  return sum;
}}
// crl:host
extern "C" double loss_sum_cpu(const float* pp, const float* tp, int64_t n, int64_t dim);
at::Tensor forward(const at::Tensor& predictions, const at::Tensor& targets) {{
  const at::Tensor pc = predictions.contiguous(), tc = targets.contiguous();
  const double sum = loss_sum_cpu(pc.data_ptr<float>(), tc.data_ptr<float>(), pc.numel(), pc.size(1));
  return at::scalar_tensor(sum / pc.numel(), predictions.options());
}}"""
    cuda = f"""
// crl:device
__global__ void loss_kernel(const float* pp, const float* tp, float* out, int64_t n, int64_t dim) {{
  __shared__ float part[256];
  float sum = 0.0f;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {{
    const float p = pp[i], t = tp[{t_index}];
    sum += {cuda_term};
  }}
  part[threadIdx.x] = sum;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {{
    if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }}
  if (threadIdx.x == 0) atomicAdd(out, part[0] / n);
}}
extern "C" void loss(const float* pp, const float* tp, float* out, int64_t n, int64_t dim, cudaStream_t stream) {{
  loss_kernel<<<264, 256, 0, stream>>>(pp, tp, out, n, dim);
}}
// crl:host
extern "C" void loss(const float* pp, const float* tp, float* out, int64_t n, int64_t dim, cudaStream_t stream);
at::Tensor forward(const at::Tensor& predictions, const at::Tensor& targets) {{
  const at::Tensor pc = predictions.contiguous(), tc = targets.contiguous();
  at::Tensor out = at::zeros({{}}, predictions.options());
  loss(pc.data_ptr<float>(), tc.data_ptr<float>(), out.data_ptr<float>(), pc.numel(), pc.size(1), at::cuda::getCurrentCUDAStream());
  return out;
}}"""
    return [
        ("naive", naive, "the reference makes temporaries for every element-wise step before the mean.",
         "one scalar loop, summing in double."),
        ("aten", other, "the reference is several ATen passes.", f"use the fused ATen loss: {aten}."),
        ("fused", fused, "the reference makes temporaries for every element-wise step before the mean.",
         "one OpenMP SIMD reduction pass over both inputs, no temporaries."),
    ], [("cuda", cuda, "the reference runs one kernel per step and a reduction.",
        "one grid-stride kernel: per-block shared-memory sums, one atomic add per block.")]


# ---- small models and special cases ------------------------------------------------------------

def special_programs():
    """(task, [(kind, program, analysis, plan)], [cuda variants]) for the tasks that fit no family."""
    out = []
    # C = diag(A) @ B as a row scaling.
    out.append(("level1/012_diag_matmul", [
        ("naive", """
// crl:host
at::Tensor forward(const at::Tensor& A, const at::Tensor& B) { return at::mm(at::diag(A), B); }""",
         "diag(A) @ B only scales the rows of B.", "build the diagonal matrix and multiply (KernelBench's first version)."),
        ("aten", """
// crl:host
at::Tensor forward(const at::Tensor& A, const at::Tensor& B) { return at::mul(B, A.view({-1, 1})); }""",
         "the reference is already one broadcast multiply.", "the same broadcast written as at::mul on a view."),
        ("fused", """
// crl:device
extern "C" void scale_rows_cpu(const float* a, const float* b, float* c, int64_t n, int64_t m) {
#pragma omp parallel for
  for (int64_t i = 0; i < n; ++i) {
    const float s = a[i];
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) c[i * m + j] = s * b[i * m + j];
  }
}
// crl:host
extern "C" void scale_rows_cpu(const float* a, const float* b, float* c, int64_t n, int64_t m);
at::Tensor forward(const at::Tensor& A, const at::Tensor& B) {
  const at::Tensor a = A.contiguous(), b = B.contiguous();
  at::Tensor c = at::empty_like(b);
  scale_rows_cpu(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), b.size(0), b.size(1));
  return c;
}""", "diag(A) @ B only scales the rows of B.", "scale each contiguous row by A[i] with OpenMP SIMD."),
    ], [("cuda", """
// crl:device
__global__ void scale_rows_kernel(const float* a, const float* b, float* c, int64_t n, int64_t m) {
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n * m; k += (int64_t)gridDim.x * blockDim.x) {
    c[k] = a[k / m] * b[k];
  }
}
extern "C" void scale_rows(const float* a, const float* b, float* c, int64_t n, int64_t m, cudaStream_t stream) {
  scale_rows_kernel<<<1056, 256, 0, stream>>>(a, b, c, n, m);
}
// crl:host
extern "C" void scale_rows(const float* a, const float* b, float* c, int64_t n, int64_t m, cudaStream_t stream);
at::Tensor forward(const at::Tensor& A, const at::Tensor& B) {
  const at::Tensor a = A.contiguous(), b = B.contiguous();
  at::Tensor c = at::empty_like(b);
  scale_rows(a.data_ptr<float>(), b.data_ptr<float>(), c.data_ptr<float>(), b.size(0), b.size(1), at::cuda::getCurrentCUDAStream());
  return c;
}""", "diag(A) @ B only scales the rows of B.", "one grid-stride kernel scaling each element by its row's A.")]))

    # RMSNorm over the channel dimension of [batch, features, dim1, dim2].
    out.append(("level1/036_rms_norm", [
        ("naive", """
// crl:host
at::Tensor forward(const at::Tensor& x) {
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  const float* in = xc.data_ptr<float>();
  float* out = y.data_ptr<float>();
  const int64_t c = x.size(1), s = x.size(2) * x.size(3);
  for (int64_t b = 0; b < x.size(0); ++b) {
    for (int64_t k = 0; k < s; ++k) {
      double sq = 0.0;
      for (int64_t f = 0; f < c; ++f) sq += in[(b * c + f) * s + k] * in[(b * c + f) * s + k];
      const float inv = 1.0f / std::sqrt((float)(sq / c) + 1e-5f);
      for (int64_t f = 0; f < c; ++f) out[(b * c + f) * s + k] = in[(b * c + f) * s + k] * inv;
    }
  }
  return y;
}""", "each position's norm reads a strided column over the channels.", "a plain loop per position over the channels."),
        ("aten", """
// crl:host
at::Tensor forward(const at::Tensor& x) { return x * at::rsqrt(x.square().mean({1}, true) + 1e-5); }""",
         "the reference computes pow, mean, add, sqrt and a division, each a pass.", "multiply by rsqrt instead of sqrt and divide."),
        ("fused", """
// crl:device
#include <vector>
extern "C" void rms_norm_cpu(const float* x, float* y, int64_t batch, int64_t c, int64_t s) {
#pragma omp parallel for
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> sq(s, 0.0f);
    const float* in = x + b * c * s;
    float* out = y + b * c * s;
    for (int64_t f = 0; f < c; ++f) {
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) sq[k] += in[f * s + k] * in[f * s + k];
    }
    for (int64_t k = 0; k < s; ++k) sq[k] = 1.0f / std::sqrt(sq[k] / c + 1e-5f);
    for (int64_t f = 0; f < c; ++f) {
#pragma omp simd
      for (int64_t k = 0; k < s; ++k) out[f * s + k] = in[f * s + k] * sq[k];
    }
  }
}
// crl:host
extern "C" void rms_norm_cpu(const float* x, float* y, int64_t batch, int64_t c, int64_t s);
at::Tensor forward(const at::Tensor& x) {
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  rms_norm_cpu(xc.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), x.size(2) * x.size(3));
  return y;
}""", "the reference makes five passes; the channel dimension is strided.",
         "two fused passes per batch: sum squares of contiguous rows, then scale, with OpenMP SIMD."),
    ], [("cuda", """
// crl:device
__global__ void rms_norm_kernel(const float* x, float* y, int64_t batch, int64_t c, int64_t s) {
  const int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (k >= batch * s) return;
  const float* in = x + (k / s) * c * s + k % s;
  float* out = y + (k / s) * c * s + k % s;
  float sq = 0.0f;
  for (int64_t f = 0; f < c; ++f) sq += in[f * s] * in[f * s];
  const float inv = rsqrtf(sq / c + 1e-5f);
  for (int64_t f = 0; f < c; ++f) out[f * s] = in[f * s] * inv;
}
extern "C" void rms_norm(const float* x, float* y, int64_t batch, int64_t c, int64_t s, cudaStream_t stream) {
  rms_norm_kernel<<<(unsigned)((batch * s + 255) / 256), 256, 0, stream>>>(x, y, batch, c, s);
}
// crl:host
extern "C" void rms_norm(const float* x, float* y, int64_t batch, int64_t c, int64_t s, cudaStream_t stream);
at::Tensor forward(const at::Tensor& x) {
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty_like(xc);
  rms_norm(xc.data_ptr<float>(), y.data_ptr<float>(), x.size(0), x.size(1), x.size(2) * x.size(3), at::cuda::getCurrentCUDAStream());
  return y;
}""", "the reference makes five passes.", "one thread per position, coalesced over positions, two reads of x.")]))

    # LayerNorm over the last three dims.
    out.append(("level1/040_layer_norm", [
        ("naive", """
// crl:host
at::Tensor forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  at::Tensor mean = x.mean({1, 2, 3}, true);
  at::Tensor var = (x - mean).pow(2).mean({1, 2, 3}, true);
  return (x - mean) / at::sqrt(var + 1e-5) * weight + bias;
}""", "layer_norm is already one ATen call.", "spell it out: mean, variance, normalise, scale and shift."),
        ("aten", """
// crl:host
at::Tensor forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return std::get<0>(at::native_layer_norm(x, weight.sizes(), weight, bias, 1e-5));
}""", "at::layer_norm checks its arguments before the native kernel.", "call at::native_layer_norm directly."),
        ("fused", """
// crl:device
extern "C" void layer_norm_cpu(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t n) {
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {
    const float* in = x + r * n;
    double sum = 0.0, sq = 0.0;
#pragma omp simd reduction(+ : sum, sq)
    for (int64_t i = 0; i < n; ++i) {
      sum += in[i];
      sq += (double)in[i] * in[i];
    }
    const double mean = sum / n;
    const float m = (float)mean, inv = (float)(1.0 / std::sqrt(sq / n - mean * mean + 1e-5));
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = (in[i] - m) * inv * w[i] + b[i];
  }
}
// crl:host
extern "C" void layer_norm_cpu(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t n);
at::Tensor forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
  at::Tensor y = at::empty_like(xc);
  layer_norm_cpu(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), x.size(0), wc.numel());
  return y;
}""", "a normalised row is contiguous.", "one OpenMP pass per row for sum and sum of squares, one for the output."),
    ], [("cuda", """
// crl:device
__global__ void layer_norm_kernel(const float* x, const float* w, const float* b, float* y, int64_t n) {
  __shared__ float s1[256], s2[256];
  const float* in = x + blockIdx.x * n;
  float sum = 0.0f, sq = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sum += in[i];
    sq += in[i] * in[i];
  }
  s1[threadIdx.x] = sum;
  s2[threadIdx.x] = sq;
  __syncthreads();
  for (int s = 128; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      s1[threadIdx.x] += s1[threadIdx.x + s];
      s2[threadIdx.x] += s2[threadIdx.x + s];
    }
    __syncthreads();
  }
  const float mean = s1[0] / n, inv = rsqrtf(s2[0] / n - mean * mean + 1e-5f);
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[blockIdx.x * n + i] = (in[i] - mean) * inv * w[i] + b[i];
}
extern "C" void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t n, cudaStream_t stream) {
  layer_norm_kernel<<<(unsigned)rows, 256, 0, stream>>>(x, w, b, y, n);
}
// crl:host
extern "C" void layer_norm(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t n, cudaStream_t stream);
at::Tensor forward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const at::Tensor xc = x.contiguous(), wc = weight.contiguous(), bc = bias.contiguous();
  at::Tensor y = at::empty_like(xc);
  layer_norm(xc.data_ptr<float>(), wc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), x.size(0), wc.numel(),
             at::cuda::getCurrentCUDAStream());
  return y;
}""", "one row per block fits the reduction.", "one block per row: shared-memory sums, then the affine output.")]))
    return out


# ---- level 2: a GEMM and an element-wise epilogue -----------------------------------------------

# task: (bias name or None, epilogue in C++ of float v, in-place ATen chain on y, an algebraic form or None,
#        CUDA epilogue of v, reduce the rows after the epilogue)
GEMM = {
    "level2/009_matmul_subtract_multiply_relu": ("linear_bias", "std::fmax((v - 2.0f) * 1.5f, 0.0f)", "y.sub_(2.0).mul_(1.5).relu_()",
                                                 None, "fmaxf((v - 2.0f) * 1.5f, 0.0f)", False),
    "level2/012_gemm_multiply_leaky_relu": ("linear_bias", "v > 0.0f ? 2.0f * v : 0.2f * v", "at::leaky_relu_(y.mul_(2.0), 0.1)",
                                            None, "v > 0.0f ? 2.0f * v : 0.2f * v", False),
    "level2/014_gemm_divide_sum_scaling": (None, "v", None,
                                           "at::matmul(x, weight.sum(0)).mul_(0.75).unsqueeze(1)", "v", True),
    "level2/040_matmul_scaling_residual_add": ("linear_bias", "1.5f * v", "y.mul_(1.5)", None, "1.5f * v", False),
    "level2/056_matmul_sigmoid_sum": ("linear_bias", "1.0f / (1.0f + std::exp(-v))", "y.sigmoid_().sum({1}, true)", None,
                                      "1.0f / (1.0f + expf(-v))", True),
    "level2/059_matmul_swish_scaling": ("linear_bias", "2.0f * v / (1.0f + std::exp(-v))", "at::silu_(y).mul_(2.0)", None,
                                        "2.0f * v / (1.0f + expf(-v))", False),
    "level2/063_gemm_relu_divide": ("linear_bias", "std::fmax(v, 0.0f) * 0.5f", "y.relu_().mul_(0.5)", None,
                                    "fmaxf(v, 0.0f) * 0.5f", False),
    "level2/076_gemm_add_relu": ("bias", "std::fmax(v, 0.0f)", "y.relu_()", None, "fmaxf(v, 0.0f)", False),
    "level2/086_matmul_divide_gelu": ("linear_bias", "0.5f * (v / 10.0f) * (1.0f + std::erf(v / 10.0f * 0.70710678f))",
                                      "at::gelu(y.div_(10.0))", None, "0.5f * (v / 10.0f) * (1.0f + erff(v / 10.0f * 0.70710678f))", False),
}


def gemm_programs(task, bias, epilogue, chain, algebraic, cuda_epilogue, row_sum):
    weight = "weight" if bias is None else "linear_weight"
    params = f"const at::Tensor& x, const at::Tensor& {weight}" + (f", const at::Tensor& {bias}" if bias else "")
    scale = " * 0.75f" if task.endswith("014_gemm_divide_sum_scaling") else ""
    out_shape = "{x.size(0), 1}" if row_sum else f"{{x.size(0), {weight}.size(0)}}"
    bias_term = f"bp[o]" if bias else "0.0f"
    naive = f"""
// crl:host
at::Tensor forward({params}) {{
  const at::Tensor xc = x.contiguous(), wc = {weight}.contiguous();
  at::Tensor y = at::zeros({out_shape}, x.options());
  const float* xp = xc.data_ptr<float>();
  const float* wp = wc.data_ptr<float>();
  {"const float* bp = " + bias + ".data_ptr<float>();" if bias else ""}
  float* yp = y.data_ptr<float>();
  const int64_t rows = x.size(0), k = x.size(1), cols = wc.size(0);
  for (int64_t r = 0; r < rows; ++r) {{
    for (int64_t o = 0; o < cols; ++o) {{
      float v = {bias_term};
      for (int64_t i = 0; i < k; ++i) v += xp[r * k + i] * wp[o * k + i];
      {"yp[r] += (" + epilogue + ")" + scale + ";" if row_sum else "yp[r * cols + o] = " + epilogue + ";"}
    }}
  }}
  return y;
}}"""
    fused = f"""
// crl:device
extern "C" void gemm_epilogue_cpu(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t k, int64_t cols) {{
#pragma omp parallel for
  for (int64_t r = 0; r < rows; ++r) {{
    float acc = 0.0f;
    for (int64_t o = 0; o < cols; ++o) {{
      float v = b ? b[o] : 0.0f;
#pragma omp simd reduction(+ : v)
      for (int64_t i = 0; i < k; ++i) v += x[r * k + i] * w[o * k + i];
      {"acc += (" + epilogue + ")" + scale + ";" if row_sum else "y[r * cols + o] = " + epilogue + ";"}
    }}
    {"y[r] = acc;" if row_sum else "(void)acc;"}
  }}
}}
// crl:host
extern "C" void gemm_epilogue_cpu(const float* x, const float* w, const float* b, float* y, int64_t rows, int64_t k, int64_t cols);
at::Tensor forward({params}) {{
  const at::Tensor xc = x.contiguous(), wc = {weight}.contiguous();
  at::Tensor y = at::empty({out_shape}, x.options());
  gemm_epilogue_cpu(xc.data_ptr<float>(), wc.data_ptr<float>(), {bias + ".contiguous().data_ptr<float>()" if bias else "nullptr"},
                    y.data_ptr<float>(), x.size(0), x.size(1), wc.size(0));
  return y;
}}"""
    if algebraic:
        other = f"""
// crl:host
at::Tensor forward({params}) {{ return {algebraic}; }}"""
        other_text = ("summing the GEMM's outputs over the hidden dimension equals one matrix-vector product "
                      "with the weight's column sums.", f"compute {algebraic}.")
    else:
        other = f"""
// crl:host
at::Tensor forward({params}) {{
  at::Tensor y = at::addmm({bias}, x, {weight}.t());
  return {chain};
}}"""
        other_text = ("every step after the GEMM allocates a new tensor.", "at::addmm with the bias, then the epilogue in place.")
    cuda_store = f"atomicAdd(y + r, ({cuda_epilogue}){scale})" if row_sum else f"y[k] = {cuda_epilogue}"
    cuda = f"""
// crl:device
__global__ void epilogue_kernel(const float* z, float* y, int64_t n, int64_t cols) {{
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {{
    const float v = z[k];
    const int64_t r = k / cols;
    (void)r;
    {cuda_store};
  }}
}}
extern "C" void epilogue(const float* z, float* y, int64_t n, int64_t cols, cudaStream_t stream) {{
  epilogue_kernel<<<1056, 256, 0, stream>>>(z, y, n, cols);
}}
// crl:host
extern "C" void epilogue(const float* z, float* y, int64_t n, int64_t cols, cudaStream_t stream);
at::Tensor forward({params}) {{
  const at::Tensor z = {"at::addmm(" + bias + ", x, " + weight + ".t())" if bias else "at::matmul(x, " + weight + ".t())"};
  at::Tensor y = {"at::zeros({x.size(0), 1}, x.options())" if row_sum else "at::empty_like(z)"};
  epilogue(z.data_ptr<float>(), y.data_ptr<float>(), z.numel(), z.size(1), at::cuda::getCurrentCUDAStream());
  return y;
}}"""
    return [
        ("naive", naive, "the GEMM dominates; the reference calls a BLAS GEMM and then one pass per epilogue step.",
         "a plain triple loop with the epilogue applied to each output."),
        ("aten", other, *other_text),
        ("fused", fused, "each epilogue step of the reference is a pass over the GEMM's output.",
         "an OpenMP loop over rows, SIMD dot products, the epilogue applied in registers."),
    ], [("cuda", cuda, "the epilogue steps are separate kernels after cuBLAS.",
        "cuBLAS for the GEMM (addmm), then one fused epilogue kernel.")]


# ---- level 3: small models ---------------------------------------------------------------------

MLP_ARGS = ("const at::Tensor& x, const at::Tensor& network_0_weight, const at::Tensor& network_0_bias,\n"
            "    const at::Tensor& network_2_weight, const at::Tensor& network_2_bias,\n"
            "    const at::Tensor& network_4_weight, const at::Tensor& network_4_bias")


def mlp_programs(task):
    naive = f"""
// crl:host
at::Tensor forward(
    {MLP_ARGS}) {{
  std::vector<at::Tensor> rows;
  for (int64_t r = 0; r < x.size(0); ++r) {{
    at::Tensor h = at::relu(at::mv(network_0_weight, x[r]) + network_0_bias);
    h = at::relu(at::mv(network_2_weight, h) + network_2_bias);
    rows.push_back(at::mv(network_4_weight, h) + network_4_bias);
  }}
  return at::stack(rows);
}}"""
    other = f"""
// crl:host
at::Tensor forward(
    {MLP_ARGS}) {{
  at::Tensor h = at::addmm(network_0_bias, x, network_0_weight.t()).relu_();
  h = at::addmm(network_2_bias, h, network_2_weight.t()).relu_();
  return at::addmm(network_4_bias, h, network_4_weight.t());
}}"""
    fused = f"""
// crl:host
at::Tensor forward(
    {MLP_ARGS}) {{
  at::Tensor h = at::empty({{x.size(0), network_0_weight.size(0)}}, x.options());
  at::addmm_out(h, network_0_bias, x, network_0_weight.t()).relu_();
  at::Tensor g = at::empty({{x.size(0), network_2_weight.size(0)}}, x.options());
  at::addmm_out(g, network_2_bias, h, network_2_weight.t()).relu_();
  return at::addmm(network_4_bias, g, network_4_weight.t());
}}"""
    cuda = f"""
// crl:device
__global__ void relu_kernel(float* y, int64_t n) {{
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) y[k] = fmaxf(y[k], 0.0f);
}}
extern "C" void relu_inplace(float* y, int64_t n, cudaStream_t stream) {{ relu_kernel<<<1056, 256, 0, stream>>>(y, n); }}
// crl:host
extern "C" void relu_inplace(float* y, int64_t n, cudaStream_t stream);
at::Tensor forward(
    {MLP_ARGS}) {{
  at::Tensor h = at::addmm(network_0_bias, x, network_0_weight.t());
  relu_inplace(h.data_ptr<float>(), h.numel(), at::cuda::getCurrentCUDAStream());
  at::Tensor g = at::addmm(network_2_bias, h, network_2_weight.t());
  relu_inplace(g.data_ptr<float>(), g.numel(), at::cuda::getCurrentCUDAStream());
  return at::addmm(network_4_bias, g, network_4_weight.t());
}}"""
    return [
        ("naive", naive, "three GEMMs with bias and ReLU.", "one matrix-vector product per row and layer."),
        ("aten", other, "each layer's linear and ReLU allocate separately.", "at::addmm with the bias folded in and ReLU in place."),
        ("fused", fused, "each layer allocates its output and the ReLU's.", "addmm_out into preallocated buffers, ReLU in place."),
    ], [("cuda", cuda, "each layer is a cuBLAS GEMM plus separate bias and ReLU kernels.",
        "cuBLAS addmm with the bias folded in, then an in-place ReLU kernel.")]


RNN_ARGS = ("const at::Tensor& x, const at::Tensor& initial_hidden, const at::Tensor& i2h_weight,\n"
            "    const at::Tensor& i2h_bias, const at::Tensor& h2o_weight, const at::Tensor& h2o_bias")


def rnn_programs(task):
    naive = f"""
// crl:host
at::Tensor forward(
    {RNN_ARGS}) {{
  std::vector<at::Tensor> rows;
  for (int64_t r = 0; r < x.size(0); ++r) {{
    const at::Tensor h = at::tanh(at::mv(i2h_weight, at::cat({{x[r], initial_hidden[r]}})) + i2h_bias);
    rows.push_back(at::mv(h2o_weight, h) + h2o_bias);
  }}
  return at::stack(rows);
}}"""
    other = f"""
// crl:host
at::Tensor forward(
    {RNN_ARGS}) {{
  const int64_t n = x.size(1);
  at::Tensor h = at::addmm(i2h_bias, x, i2h_weight.narrow(1, 0, n).t());
  h.addmm_(initial_hidden, i2h_weight.narrow(1, n, i2h_weight.size(1) - n).t()).tanh_();
  return at::addmm(h2o_bias, h, h2o_weight.t());
}}"""
    fused = f"""
// crl:host
at::Tensor forward(
    {RNN_ARGS}) {{
  const at::Tensor h = at::addmm(i2h_bias, at::cat({{x, initial_hidden}}, 1), i2h_weight.t()).tanh_();
  return at::addmm(h2o_bias, h, h2o_weight.t());
}}"""
    cuda = f"""
// crl:device
__global__ void tanh_kernel(float* y, int64_t n) {{
  for (int64_t k = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) y[k] = tanhf(y[k]);
}}
extern "C" void tanh_inplace(float* y, int64_t n, cudaStream_t stream) {{ tanh_kernel<<<1056, 256, 0, stream>>>(y, n); }}
// crl:host
extern "C" void tanh_inplace(float* y, int64_t n, cudaStream_t stream);
at::Tensor forward(
    {RNN_ARGS}) {{
  at::Tensor h = at::addmm(i2h_bias, at::cat({{x, initial_hidden}}, 1), i2h_weight.t());
  tanh_inplace(h.data_ptr<float>(), h.numel(), at::cuda::getCurrentCUDAStream());
  return at::addmm(h2o_bias, h, h2o_weight.t());
}}"""
    return [
        ("naive", naive, "one RNN cell: concatenation, two GEMMs, tanh.", "one matrix-vector product per row."),
        ("aten", other, "the concatenation copies x and the hidden state.",
         "no concatenation: two addmm calls on the weight's column blocks, tanh in place."),
        ("fused", fused, "the bias add and tanh allocate separately.", "addmm with the bias folded in, tanh in place."),
    ], [("cuda", cuda, "the cell is two cuBLAS GEMMs plus element-wise kernels.", "addmm with the bias folded in, an in-place tanh kernel.")]


def all_tasks():
    for task, spec in UNARY.items():
        yield (task, *unary_programs(task, *spec))
    for task, spec in REDUCE.items():
        yield (task, *reduce_programs(task, *spec))
    for task, spec in LOSS.items():
        yield (task, *loss_programs(task, *spec))
    yield from special_programs()
    for task, spec in GEMM.items():
        yield (task, *gemm_programs(task, *spec))
    for task in ("level3/001_mlp", "level3/002_shallow_wide_mlp"):
        yield (task, *mlp_programs(task))
    yield ("level3/033_vanilla_rnn", *rnn_programs("level3/033_vanilla_rnn"))


def portable(program):
    """Whether a CPU program also runs on the CUDA backend: ATen calls only, no host pointers."""
    return "// crl:device" not in program and "data_ptr" not in program and "accessor" not in program


def default_job_tasks():
    """jobs/default.yaml's tasks.ids (one flow list on one line: read without a YAML library)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "jobs", "default.yaml")
    for line in open(path):
        match = re.match(r"\s*ids:\s*\[(.*)\]", line)
        if match:
            return [t.strip() for t in match.group(1).split(",")]
    raise SystemExit(f"{path}: no tasks.ids line")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder for cpu_raw.jsonl and cuda.jsonl")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    cpu, cuda = [], []
    for task, variants, cuda_variants in all_tasks():
        name = task.split("/")[1]
        for kind, program, analysis, plan in cuda_variants:
            cuda.append({"task": task, "completion": completion(analysis, plan, program), "id": f"{name}.{kind}", "backend": "cuda"})
        for kind, program, analysis, plan in variants:
            row = {"task": task, "completion": completion(analysis, plan, program), "id": f"{name}.{kind}", "backend": "cpu"}
            cpu.append(row)
            if portable(program):
                cuda.append(dict(row, backend="any"))
    default_tasks = default_job_tasks()
    cuda_default = [row for row in cuda if row["task"] in default_tasks]
    for name, rows in (("cpu_raw.jsonl", cpu), ("cuda.jsonl", cuda), ("cuda_default.jsonl", cuda_default)):
        with open(os.path.join(args.out, name), "w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    print(f"wrote {len(cpu)} CPU programs and {len(cuda)} for the CUDA backend to {args.out}")


if __name__ == "__main__":
    main()
