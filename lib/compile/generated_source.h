// The C++ and CUDA files crl writes for a program: the prelude header, the host translation unit
// (host section + crl_forward glue) and the device translation unit, with #line directives so
// compiler messages name the .crl file's own lines.
#pragma once

#include <cstddef>
#include <string>

#include "compile/compiler.h"
#include "program/program_text.h"

namespace crl {

// The header precompiled once per node and backend: ATen (+ CUDA context and runtime on cuda).
std::string prelude_header_source(Backend backend);
// The host section, then glue defining crl_forward (calls forward with num_args arguments) and
// crl_abi_version (returns `abi_version`).
std::string host_source(const ProgramText& program, size_t num_args, const std::string& abi_version);
// Whether a device section names half-precision types or intrinsics (then <cuda_fp16.h> and
// <cuda_bf16.h> are included for it on the CUDA backend).
bool names_half_precision(const std::string& device_text);
// The device section after its standard includes; "" when the program has no (or an empty) device section.
std::string device_source(const ProgramText& program, Backend backend);

// `"origin"` escaped for a #line directive.
std::string line_directive(int line, const std::string& origin);

}  // namespace crl
