// The judge's comparison of one output on the GPU in one pass (no float64 temporaries), by the
// rule the CPU pass uses (compare_rule.h), with the same worst element; and the byte equality of
// a candidate's inputs with the judge's copy, with no temporaries. A plain C++ interface: the .cu
// file compiles without LibTorch headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "worker/compare_rule.h"

namespace crl::worker::cuda {

enum class ValueType { f16, bf16, f32, f64, u8, i8, i16, i32, i64, boolean };

// Thread blocks compare_values launches for n elements; `partials` must hold that many CompareStats
// (device memory, 16-byte aligned).
int compare_blocks(int64_t n);
// Compares n contiguous elements of ref and cand (device pointers) and returns the totals (waits
// for the stream). Throws crl::Error on a CUDA error.
CompareStats compare_values(ValueType type, const void* ref, const void* cand, int64_t n, double atol, double rtol,
                            CompareStats* partials, cudaStream_t stream);

// A float32 output against the float64 reference: `delta` the float32 reference's error against it
// and `scale` its error scale, both bfloat16 (compare_rule::add_element_float64); the same blocks and
// partials as compare_values.
CompareStats compare_values_float64(const float* ref, const float* cand, const void* delta, const void* scale, int64_t n, double atol,
                                    double rtol, double factor, CompareStats* partials, cudaStream_t stream);

// Whether `bytes` bytes at a and b (device pointers) are equal (waits for the stream). `flag` is 4
// bytes of device memory for the answer. Throws crl::Error on a CUDA error.
bool bytes_equal(const void* a, const void* b, uint64_t bytes, uint32_t* flag, cudaStream_t stream);

}  // namespace crl::worker::cuda
