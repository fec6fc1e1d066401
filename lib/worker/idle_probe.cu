// The judge's idle probe kernel (see idle_probe.h).
#include "worker/idle_probe.h"

namespace crl::worker {
namespace {

__device__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(uint64_t nanoseconds) {
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) {
  }
}

}  // namespace

void spin_wall_clock(uint64_t nanoseconds, cudaStream_t stream) { spin_kernel<<<1, 1, 0, stream>>>(nanoseconds); }

}  // namespace crl::worker
