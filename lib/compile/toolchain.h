// The compilers and libraries a program is built with, their versions (memoised, so a cache hit
// runs no compiler), and the local GPU's architecture.
#pragma once

#include <string>

namespace crl {

struct Toolchain {
  std::string cxx;                 // g++ (absolute path): device sections of the CPU backend, links
  std::string host_cxx;            // host sections and the prelude: clang++ where it works, else cxx
  std::string nvcc;                // "" when absent
  std::string torch_include_dir;
  std::string torch_library_dir;
  std::string torch_cxx_flags;     // e.g. -D_GLIBCXX_USE_CXX11_ABI=1
  std::string torch_version;
  std::string cuda_home;           // "" when absent
  std::string python_include_dir;  // the embedded Python's headers (torch extensions); "" when crl has none
};

// What crl was built with (CMake bakes the paths in); empty fields of `overrides` keep those.
Toolchain default_toolchain();

// First line of `compiler --version`, memoised in this process and on disk under
// `cache_dir`/toolchains keyed by the binary's path, size and mtime. "" if it does not run.
std::string compiler_version(const std::string& compiler, const std::string& cache_dir);

// Whether `cxx -fuse-ld=gold` links a C++ shared library here (gold links against LibTorch's
// large libraries about twice as fast as bfd). Memoised like compiler_version.
bool gold_links_cxx(const std::string& cxx, const std::string& cache_dir);

// Whether `clangxx` can stand in for `cxx` on host sections: it builds a precompiled header with
// its templates instantiated (-fpch-instantiate-templates, clang 11 and later), and an object it
// compiles against that header links with `cxx` into a C++ shared library. g++ re-instantiates
// the prelude's pending templates (ATen's) in every program, about 2 s of each host compile;
// clang does that once, in the header. Memoised like compiler_version.
bool clang_can_compile_host(const std::string& clangxx, const std::string& cxx, const std::string& cache_dir);

// A hash of this CPU's model and feature flags (code built with -march=native is only valid on
// CPUs like it, so the CPU backend's cache key carries it). Memoised.
const std::string& cpu_fingerprint();

// "sm_XY[a]" of the current GPU (the 'a' suffix for sm_90 and later, whose arch-specific features such as
// wgmma need it); "sm_90a" (the H200) when no GPU is visible. Memoised.
const std::string& local_cuda_arch();

// Throws InputError unless `arch` looks like sm_<digits>[a|f].
void validate_cuda_arch(const std::string& arch);

}  // namespace crl
