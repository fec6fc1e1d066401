// Toolchain discovery and memoised version probes.
#include "compile/toolchain.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/hash.h"
#include "core/subprocess.h"

#ifdef CRL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#ifndef CRL_DEFAULT_CXX
#define CRL_DEFAULT_CXX "g++"
#endif
#ifndef CRL_TORCH_INCLUDE_DIR
#error "CRL_TORCH_INCLUDE_DIR must be defined by the build"
#endif

namespace crl {

namespace fs = std::filesystem;

Toolchain default_toolchain() {
  Toolchain t;
  t.cxx = find_on_path(CRL_DEFAULT_CXX);
  if (t.cxx.empty()) t.cxx = find_on_path("g++");
#ifdef CRL_DEFAULT_NVCC
  t.nvcc = find_on_path(CRL_DEFAULT_NVCC);
#endif
  if (t.nvcc.empty()) t.nvcc = find_on_path("nvcc");
  t.torch_include_dir = CRL_TORCH_INCLUDE_DIR;
  t.torch_library_dir = CRL_TORCH_LIBRARY_DIR;
  t.torch_cxx_flags = CRL_TORCH_CXX_FLAGS;
  t.torch_version = CRL_TORCH_VERSION;
#ifdef CRL_DEFAULT_CUDA_HOME
  t.cuda_home = CRL_DEFAULT_CUDA_HOME;
#endif
  if (t.cuda_home.empty() && !t.nvcc.empty()) t.cuda_home = fs::path(t.nvcc).parent_path().parent_path().string();
  return t;
}

std::string compiler_version(const std::string& compiler, const std::string& cache_dir) {
  static std::mutex mutex;
  static std::map<std::string, std::string> memo;
  std::error_code ec;
  const std::string real = fs::canonical(compiler, ec).string();
  struct stat st {};
  if (ec || stat(real.c_str(), &st) != 0) return "";
  const std::string identity = fmt::format("{}|{}|{}.{}", real, st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  {
    std::lock_guard lock(mutex);
    if (const auto it = memo.find(identity); it != memo.end()) return it->second;
  }
  const fs::path memo_file = fs::path(cache_dir) / "toolchains" / (sha256_hex(identity) + ".version");
  std::string version;
  if (std::ifstream in(memo_file); in) std::getline(in, version);
  if (version.empty()) {
    const CommandResult r = run_command({real, "--version"}, {.timeout = std::chrono::seconds(60)});
    if (!r.ok()) return "";
    // nvcc's useful line is its last ("Build cuda_13.0.r13.0/..."); g++'s is its first.
    std::istringstream lines(r.output);
    std::string line;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      version += (version.empty() ? "" : " | ") + line;
      if (version.size() > 400) break;
    }
    fs::create_directories(memo_file.parent_path(), ec);
    const fs::path tmp = memo_file.string() + fmt::format(".tmp{}", static_cast<long>(getpid()));
    if (std::ofstream out(tmp); out) {
      out << version << "\n";
      out.close();
      fs::rename(tmp, memo_file, ec);
    }
  }
  std::lock_guard lock(mutex);
  memo[identity] = version;
  return version;
}

const std::string& cpu_fingerprint() {
  static const std::string fingerprint = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(in, line) && (model.empty() || flags.empty())) {
      if (model.empty() && line.starts_with("model name")) model = line;
      if (flags.empty() && line.starts_with("flags")) flags = line;
    }
    return sha256_hex(model + "\n" + flags).substr(0, 16);
  }();
  return fingerprint;
}

const std::string& local_cuda_arch() {
  static const std::string arch = [] {
    std::string result = "sm_90a";
#ifdef CRL_HAVE_CUDA
    int count = 0, device = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0 && cudaGetDevice(&device) == cudaSuccess) {
      int major = 0, minor = 0;
      if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) == cudaSuccess &&
          cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) == cudaSuccess) {
        result = fmt::format("sm_{}{}{}", major, minor, major >= 9 ? "a" : "");
      }
    } else {
      cudaGetLastError();  // clear the "no device" error so later CUDA calls do not see it
    }
#endif
    return result;
  }();
  return arch;
}

void validate_cuda_arch(const std::string& arch) {
  static const std::regex re("sm_[0-9]{2,3}[af]?");
  if (!std::regex_match(arch, re)) {
    throw InputError(fmt::format("CUDA arch '{}' is not of the form sm_<major><minor>[a|f], e.g. sm_90a", arch));
  }
}

}  // namespace crl
