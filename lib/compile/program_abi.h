// The binary contract between crl and a compiled program's shared library (crl-worker loads it).
//
// A program compiles to one .so that exports, with C linkage:
//   int crl_forward(const at::Tensor* args, size_t nargs, std::vector<at::Tensor>* outputs,
//                   char* error, size_t error_len);
//       Calls the host section's forward(args[0], ..., args[nargs-1]); nargs must equal the task's
//       num_args. Returns 0 and fills *outputs (cleared first) on success; otherwise returns
//       nonzero and writes a NUL-terminated message (cut to error_len - 1 bytes) into error.
//       Never throws.
//   const char* crl_abi_version();
//       kProgramAbiVersion of the crl that compiled it; a loader refuses any other value, since
//       at::Tensor and std::vector must have the same layout on both sides (same LibTorch).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace at {
class Tensor;
}

namespace crl {

// Bump kProgramAbiNumber whenever the signatures or semantics above change.
inline constexpr int kProgramAbiNumber = 1;

// "crl-program-abi/1 libtorch/<version>": the ABI number and the LibTorch the program was built against.
const char* program_abi_version();

inline constexpr const char* kForwardSymbol = "crl_forward";
inline constexpr const char* kAbiVersionSymbol = "crl_abi_version";

using ProgramForwardFn = int (*)(const at::Tensor* args, size_t nargs, std::vector<at::Tensor>* outputs,
                                 char* error, size_t error_len);
using ProgramAbiVersionFn = const char* (*)();

}  // namespace crl
