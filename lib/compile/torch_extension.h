// A torch extension as torch.utils.cpp_extension.load_inline builds one, for a KernelBench-format
// candidate (its worker cannot start a compiler, so crl's compiler builds it): the request, the
// files crl writes for it, and which of the candidate's extra flags a compile may take.
#pragma once

#include <string>
#include <vector>

namespace crl {

struct ExtensionRequest {
  std::string origin;       // the candidate it is for, in messages
  std::string name;         // the module's name (TORCH_EXTENSION_NAME)
  std::string cpp_source;   // load_inline's cpp_sources, joined by newlines
  std::string cuda_source;  // its cuda_sources, joined; "" for none
  std::vector<std::string> functions;  // bound for Python, as load_inline binds them
  bool bindings = true;     // false: load_inline got no `functions` (the sources define their own module)
  std::vector<std::string> extra_cflags, extra_cuda_cflags, extra_ldflags;
  bool cuda = false;        // the CUDA backend: CUDA's headers and libraries (cuda_source needs it)
  std::string cuda_arch;    // "sm_90a"...; empty: the compiler's default
};

// Why the request cannot be compiled as given, "" when it can: a name that is no Python identifier,
// a function name that is no C++ identifier, CUDA sources without the CUDA backend, or a flag a
// candidate may not pass (one that reads a file of its choosing, loads a plugin or changes the
// tools). Allowed: -O*, -std=*, -D*, -U*, -f* (not -fplugin), -m*, -W* (not -Wl, -Wa, -Wp), -g*,
// nvcc's --use_fast_math, --expt-relaxed-constexpr, --expt-extended-lambda, --extended-lambda,
// -lineinfo, -Xptxas (=VALUE, or VALUE as the next entry) and --ptxas-options values,
// -maxrregcount, -prec-div, -prec-sqrt, --ftz, --fmad, -arch and -gencode values; link flags -l of
// CUDA's libraries.
std::string extension_request_problem(const ExtensionRequest& request);

// main.cpp as load_inline writes it (the module's name defined first): <torch/extension.h>, the C++ sources, then (with bindings) a
// PYBIND11_MODULE binding each function (wrapped for PyTorch's error handling).
std::string extension_main_source(const ExtensionRequest& request);

// cuda.cu as load_inline writes it: torch's types and CUDA's runtime headers, then the CUDA sources;
// "" when there are none.
std::string extension_cuda_source(const ExtensionRequest& request);

// Which torch/extension.h an extension's files (main.cpp, cuda.cu) are compiled with. `light`:
// torch's tensors, ops and Python bindings (torch/types.h, torch/python.h) without torch/all.h's C++
// frontend (nn, optim, data, jit), whose class templates' virtual members each compile would
// otherwise instantiate again (most of a front end's time: main.cpp 2.25 s against 3.5 s by clang 19,
// 2-core machine); a source that needs those compiles again with `torch`'s own header.
enum class ExtensionHeaders { light, torch };

// The light torch/extension.h, written where the compiler looks before torch's headers.
extern const char* const kLightTorchExtensionHeader;

// Whether a compiler's log of a failed compile names an undeclared name (what the lighter header
// would cause; clang's and g++'s wordings), rather than an error torch's own header would not mend.
bool may_lack_a_declaration(const std::string& compiler_log);

}  // namespace crl
