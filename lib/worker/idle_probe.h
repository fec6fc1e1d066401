// The judge's idle probe kernel: one thread that spins for a span of wall-clock time on the GPU.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace crl::worker {

// Enqueues a kernel that spins until the GPU's global timer (nanoseconds of wall-clock time) has
// advanced by `nanoseconds` since it started. Unlike a spin of clock cycles, its length does not
// change with the SM clock (an idle GPU runs slower clocks), so a probe that takes much longer
// than its span waited for another context's work.
void spin_wall_clock(uint64_t nanoseconds, cudaStream_t stream);

}  // namespace crl::worker
