// The judge's comparison of one output on the GPU in one pass (no float64 temporaries): the rules
// of output_comparison.cpp's compare_values (each element in float64, |c - r| <= atol + rtol * |r|
// without a fused multiply-add, NaN only where both are NaN, infinities equal, integers and bool
// exact) and the same worst element (the largest excess, the smallest index among equals). A plain
// C++ interface: the .cu file compiles without LibTorch headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace crl::eval::cuda {

enum class ValueType { f16, bf16, f32, f64, u8, i8, i16, i32, i64, boolean };

struct CompareStats {
  int64_t bad = 0;           // elements outside the tolerance or breaking a NaN/Inf rule
  double max_abs_error = 0;  // over the elements whose error is finite
  double worst_excess = -1;  // error / allowed error of the worst element; -1: none looked at
  int64_t worst_index = -1;
  double worst_reference = 0, worst_candidate = 0;
};

// Thread blocks compare_values launches for n elements; `partials` must hold that many CompareStats
// (device memory, 16-byte aligned).
int compare_blocks(int64_t n);
// Compares n contiguous elements of ref and cand (device pointers) and returns the totals (waits
// for the stream). Throws crl::Error on a CUDA error.
CompareStats compare_values(ValueType type, const void* ref, const void* cand, int64_t n, double atol, double rtol,
                            CompareStats* partials, cudaStream_t stream);

}  // namespace crl::eval::cuda
