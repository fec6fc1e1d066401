// load_inline's cuda.cu built by clang's CUDA mode against torch's headers precompiled once per
// node for each side (device and host): nvcc parses those ~400,000 lines three times per extension
// and takes no precompiled header (cold 21.5 s on the H100 machine); clang with the two headers
// takes a few seconds. What clang cannot build (a flag with no translation, code only nvcc
// accepts) nvcc builds as before (compiler.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compile/torch_extension.h"

namespace crl {

// nvcc's extra flags of a load_inline call, as clang's CUDA mode takes them.
struct ClangCudaFlags {
  // --use_fast_math's approximate sinf/expf/...: a language option of the precompiled header, so
  // it selects that header's variant.
  bool approx_transcendentals = false;
  std::vector<std::string> driver;      // -D and -U, as given
  std::vector<std::string> device_cc1;  // the device compile's code generation: denormals, division, sqrt, fmad
  std::vector<std::string> ptxas;       // -Xptxas / --ptxas-options values, --maxrregcount
};

// The translation of `nvcc_flags` (ExtensionRequest::extra_cuda_cflags, already allowed by
// extension_request_problem), or nullopt with *why naming the first flag clang has no exact
// counterpart for. -O levels, -std=c++14/17, -arch/-gencode (crl picks the GPU's arch),
// -lineinfo and the lambda/constexpr switches (clang's defaults) change nothing here.
std::optional<ClangCudaFlags> clang_cuda_flags(const std::vector<std::string>& nvcc_flags, std::string* why);

// What the precompiled headers hold: torch's headers that load_inline's cuda.cu starts with and
// those CUDA-L1's and KernelBench's cuda_sources include most (torch/extension.h, ATen's CUDA
// context, c10's device guard). A source that uses one of them without including it compiles here
// where nvcc would refuse it; nothing else changes.
extern const char* const kClangCudaPrelude;

// The jobs of a `clang++ -###` run: one argv per line that starts with a quoted program.
std::vector<std::vector<std::string>> parse_driver_jobs(const std::string& driver_output);

// Whether a job is a compiler front end run (-cc1) and for which side.
bool is_cc1(const std::vector<std::string>& job);
bool is_device_cc1(const std::vector<std::string>& job);

// The jobs of compiling the prelude, changed to write each side's precompiled header (with its
// templates instantiated) to `device_pch` / `host_pch` instead of an object; the ptxas, fatbinary
// and host-only steps are dropped.
std::vector<std::vector<std::string>> pch_emitting_jobs(const std::vector<std::vector<std::string>>& jobs,
                                                        const std::string& device_pch, const std::string& host_pch);

// The jobs of compiling cuda.cu with each side's precompiled header, `flags`' device and ptxas
// options added, and fatbinary's image arguments in the form of `fatbinary_major`'s toolkit
// (clang 19 writes CUDA 12's --image=profile=...; CUDA 13 takes --image3=kind=...,sm=...).
std::vector<std::vector<std::string>> jobs_with_pch(std::vector<std::vector<std::string>> jobs, const std::string& device_pch,
                                                    const std::string& host_pch, const ClangCudaFlags& flags, int cuda_major);

// The headers written into a folder clang searches before the toolkit's and torch's: the ones
// clang's CUDA wrapper includes that a newer toolkit no longer ships (texture_fetch_functions.h,
// gone in CUDA 13), and for `light` its torch/extension.h. Relative path -> text.
std::vector<std::pair<std::string, std::string>> clang_cuda_shim_headers(ExtensionHeaders headers);

}  // namespace crl
