// Process-wide ATen settings for running programs (see run_settings.h).
#include "program/run_settings.h"

#include <ATen/Context.h>

namespace crl {

void apply_program_run_settings() {
  // The per-op precision API (the allow_tf32 setters are its deprecated front end).
  auto& context = at::globalContext();
  for (const at::Float32Op op : {at::Float32Op::CONV, at::Float32Op::RNN, at::Float32Op::MATMUL}) {
    context.setFloat32Precision(at::Float32Backend::CUDA, op, at::Float32Precision::IEEE);
  }
}

}  // namespace crl
