// Process-wide ATen settings for running programs (see run_settings.h).
#include "program/run_settings.h"

#include <ATen/Context.h>
#include <fmt/format.h>

#include "core/error.h"

namespace crl {

std::string_view precision_name(Precision p) { return p == Precision::tf32 ? "tf32" : "fp32"; }

Precision parse_precision(std::string_view name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "tf32") return Precision::tf32;
  throw InputError(fmt::format("precision must be fp32 or tf32 (got '{}')", name));
}

void apply_program_run_settings(Precision precision) {
  // Through the allow_tf32 setters, not the per-op precision API: torch 2.11 keeps a legacy flag
  // beside the per-op ones, and a per-op setting alone makes Python's `torch.backends.cudnn.allow_tf32`
  // getter raise ("a mix of the legacy and new APIs"), which a KernelBench-format candidate reading
  // it (7 of CUDA-L1's H100 modules, in their constructors) then failed on, through no fault of its own.
  auto& context = at::globalContext();
  const bool tf32 = precision == Precision::tf32;
  context.setAllowTF32CuDNN(tf32);
  context.setAllowTF32CuBLAS(tf32);
}

}  // namespace crl
