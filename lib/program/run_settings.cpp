// Process-wide ATen settings for running programs (see run_settings.h).
#include "program/run_settings.h"

#include <ATen/Context.h>

namespace crl {

void apply_program_run_settings() {
  // No TF32 for fp32 convolutions, RNNs and matmuls. Through the allow_tf32 setters, not the per-op
  // precision API: torch 2.11 keeps a legacy flag beside the per-op ones, and a per-op setting
  // alone makes Python's `torch.backends.cudnn.allow_tf32` getter raise ("a mix of the legacy and
  // new APIs"), which a KernelBench-format candidate reading it (7 of CUDA-L1's H100 modules, in
  // their constructors) then failed on, through no fault of its own.
  auto& context = at::globalContext();
  context.setAllowTF32CuDNN(false);
  context.setAllowTF32CuBLAS(false);
}

}  // namespace crl
