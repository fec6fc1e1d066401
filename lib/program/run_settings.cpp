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
  // The per-op precision API (the allow_tf32 setters are its deprecated front end).
  auto& context = at::globalContext();
  const at::Float32Precision p = precision == Precision::tf32 ? at::Float32Precision::TF32 : at::Float32Precision::IEEE;
  for (const at::Float32Op op : {at::Float32Op::CONV, at::Float32Op::RNN, at::Float32Op::MATMUL}) {
    context.setFloat32Precision(at::Float32Backend::CUDA, op, p);
  }
}

}  // namespace crl
