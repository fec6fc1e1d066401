// The files and flag rules of a load_inline extension (torch_extension.h).
#include "compile/torch_extension.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <string_view>

namespace crl {
namespace {

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (const char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// A compile flag a candidate may pass: it changes code generation or defines macros, and names no
// file, plugin or tool (-I, -include, @file, -fplugin, -B, -specs, -Wl/-Wa/-Wp, -Xcompiler, -ccbin
// are refused).
bool allowed_compile_flag(std::string_view f) {
  static constexpr std::array<std::string_view, 7> exact = {
      "--use_fast_math", "-use_fast_math",  "--expt-relaxed-constexpr", "--expt-extended-lambda",
      "--extended-lambda", "-lineinfo",     "--restrict"};
  for (const auto e : exact) {
    if (f == e) return true;
  }
  // nvcc's code-generation and math switches (CUDA-L1's kernels pass --ptxas-options=-v,
  // --maxrregcount=48, -prec-div=false, --ftz=true, --fmad=true).
  for (const auto prefix : {"-Xptxas=", "--ptxas-options=", "-maxrregcount=", "--maxrregcount=", "-prec-div=", "--prec-div=",
                            "-prec-sqrt=", "--prec-sqrt=", "--ftz=", "--fmad=", "-arch=", "--gpu-architecture=", "-gencode="}) {
    if (starts_with(f, prefix)) return f.find_first_of("@/") == std::string_view::npos;
  }
  if (starts_with(f, "-fplugin") || starts_with(f, "-Wl") || starts_with(f, "-Wa") || starts_with(f, "-Wp")) return false;
  if (f.find_first_of("@/") != std::string_view::npos && !starts_with(f, "-D")) return false;
  for (const auto prefix : {"-O", "-std=", "-D", "-U", "-f", "-m", "-W", "-g"}) {
    if (starts_with(f, prefix)) return f.find('\n') == std::string_view::npos;
  }
  return false;
}

bool allowed_link_flag(std::string_view f) {
  for (const auto library : {"-lcublas", "-lcublasLt", "-lcudnn", "-lcuda", "-lcudart", "-lcurand", "-lcusparse", "-lcusolver", "-lcufft"}) {
    if (f == library) return true;
  }
  return false;
}

}  // namespace

std::string extension_request_problem(const ExtensionRequest& r) {
  if (!is_identifier(r.name)) {
    return fmt::format("{}: load_inline's name '{}' is not a Python identifier (it names the module)", r.origin, r.name.substr(0, 80));
  }
  for (const auto& f : r.functions) {
    if (!is_identifier(f)) return fmt::format("{}: load_inline's function '{}' is not a C++ identifier", r.origin, f.substr(0, 80));
  }
  if (!r.cuda_source.empty() && !r.cuda) {
    return fmt::format("{}: load_inline's cuda_sources need the cuda backend (this evaluation is on the CPU)", r.origin);
  }
  for (const auto* flags : {&r.extra_cflags, &r.extra_cuda_cflags}) {
    for (size_t i = 0; i < flags->size(); ++i) {
      const std::string& f = (*flags)[i];
      // `-Xptxas VALUE` (two entries): the value passes to ptxas, and may name no file.
      if (f == "-Xptxas" && i + 1 < flags->size() && (*flags)[i + 1].find_first_of("@/") == std::string::npos) {
        ++i;
        continue;
      }
      if (!allowed_compile_flag(f)) {
        return fmt::format("{}: load_inline's compile flag '{}' is not one crl passes (a flag may not name a file, plugin or "
                           "tool: docs/evaluation.md, \"KernelBench-format candidates\")",
                           r.origin, f.substr(0, 80));
      }
    }
  }
  for (const auto& f : r.extra_ldflags) {
    if (!allowed_link_flag(f)) {
      return fmt::format("{}: load_inline's link flag '{}' is not one crl passes (only CUDA's libraries: -lcublas, -lcudnn, ...)",
                         r.origin, f.substr(0, 80));
    }
  }
  return "";
}

std::string extension_main_source(const ExtensionRequest& r) {
  // The module's name as a macro of the file, not a flag: one precompiled torch/extension.h then
  // serves every extension (compiler.cpp).
  std::string out = fmt::format("#define TORCH_EXTENSION_NAME {}\n#include <torch/extension.h>\n", r.name);
  out += r.cpp_source;
  if (!r.bindings) return out + "\n";
  out += "\nPYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n";
  for (const auto& f : r.functions) out += fmt::format("m.def(\"{0}\", torch::wrap_pybind_function({0}), \"{0}\");\n", f);
  out += "}\n";
  return out;
}

const char* const kLightTorchExtensionHeader =
    "// crl: torch/extension.h for load_inline's sources (lib/compile/torch_extension.h): torch's tensors, ops\n"
    "// and Python bindings without torch/all.h's C++ frontend.\n"
    "#pragma once\n#include <torch/types.h>\n#include <torch/python.h>\n";

bool may_lack_a_declaration(const std::string& log) {
  for (const char* sign : {"use of undeclared identifier", "no member named", "unknown type name", "no type named",
                           "no template named", "undeclared identifier", "incomplete type",
                           // g++
                           "was not declared in this scope", "has not been declared", "is not a member of",
                           "does not name a type", "is not a template"}) {
    if (log.find(sign) != std::string::npos) return true;
  }
  return false;
}

std::string extension_cuda_source(const ExtensionRequest& r) {
  if (r.cuda_source.empty()) return "";
  return "#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n" + r.cuda_source + "\n";
}

}  // namespace crl
