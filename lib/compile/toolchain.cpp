// Toolchain discovery and memoised version probes.
#include "compile/toolchain.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
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
#ifdef CRL_PYTHON_INCLUDE_DIR
  t.python_include_dir = CRL_PYTHON_INCLUDE_DIR;
#endif
  return t;
}

namespace {

// Memoises `compute()` for one compiler binary, in this process and on disk under
// `cache_dir`/toolchains, keyed by the binary's path, size and mtime plus `what`.
// Returns "" (and memoises nothing) when the binary is missing.
template <typename Compute>
std::string memoised_for_compiler(const std::string& compiler, const std::string& what,
                                  const std::string& cache_dir, Compute compute) {
  static std::mutex mutex;
  static std::map<std::string, std::string> memo;
  std::error_code ec;
  const std::string real = fs::canonical(compiler, ec).string();
  struct stat st {};
  if (ec || stat(real.c_str(), &st) != 0) return "";
  const std::string identity = fmt::format("{}|{}|{}.{}|{}", real, st.st_size, st.st_mtim.tv_sec,
                                           st.st_mtim.tv_nsec, what);
  {
    std::lock_guard lock(mutex);
    if (const auto it = memo.find(identity); it != memo.end()) return it->second;
  }
  const fs::path memo_file = fs::path(cache_dir) / "toolchains" / (sha256_hex(identity) + "." + what);
  std::string value;
  if (std::ifstream in(memo_file); in) std::getline(in, value);
  if (value.empty()) {
    value = compute(real);
    if (value.empty()) return "";
    fs::create_directories(memo_file.parent_path(), ec);
    const fs::path tmp = memo_file.string() + fmt::format(".tmp{}", static_cast<long>(getpid()));
    if (std::ofstream out(tmp); out) {
      out << value << "\n";
      out.close();
      fs::rename(tmp, memo_file, ec);
    }
  }
  std::lock_guard lock(mutex);
  memo[identity] = value;
  return value;
}

}  // namespace

std::string compiler_version(const std::string& compiler, const std::string& cache_dir) {
  return memoised_for_compiler(compiler, "version", cache_dir, [](const std::string& real) {
    const CommandResult r = run_command({real, "--version"}, {.timeout = std::chrono::seconds(60)});
    if (!r.ok()) return std::string();
    // nvcc's useful line is its last ("Build cuda_13.0.r13.0/..."); g++'s is its first.
    std::istringstream lines(r.output);
    std::string line, version;
    while (std::getline(lines, line)) {
      if (line.empty()) continue;
      version += (version.empty() ? "" : " | ") + line;
      if (version.size() > 400) break;
    }
    return version;
  });
}

bool gold_links_cxx(const std::string& cxx, const std::string& cache_dir) {
  if (find_on_path("ld.gold").empty()) return false;
  // Seen on the GPU machine: its g++ (installed under /opt/gcc) passes gold a libstdc++ path that
  // does not exist, so every link fails. Link a small C++ library once to find out.
  const std::string answer = memoised_for_compiler(cxx, "gold", cache_dir, [&](const std::string& real) {
    std::error_code ec;
    const fs::path dir = fs::path(cache_dir) / "toolchains" / fmt::format("gold-probe-{}", static_cast<long>(getpid()));
    fs::create_directories(dir, ec);
    const fs::path source = dir / "probe.cpp";
    if (std::ofstream out(source); out) out << "#include <string>\nstd::string crl_probe() { return std::string(64, 'x'); }\n";
    const CommandResult r = run_command({real, "-shared", "-fPIC", "-fuse-ld=gold", source.string(), "-o",
                                         (dir / "probe.so").string()},
                                        {.timeout = std::chrono::seconds(60)});
    fs::remove(dir / "probe.so", ec);
    fs::remove(source, ec);
    fs::remove(dir, ec);
    return std::string(r.ok() ? "yes" : "no");
  });
  return answer == "yes";
}

bool clang_can_compile_host(const std::string& clangxx, const std::string& cxx, const std::string& cache_dir) {
  const std::string answer = memoised_for_compiler(clangxx, "host-for-" + sha256_hex(cxx).substr(0, 16), cache_dir, [&](const std::string& real) {
    std::error_code ec;
    const fs::path dir = fs::path(cache_dir) / "toolchains" / fmt::format("clang-probe-{}", static_cast<long>(getpid()));
    fs::create_directories(dir, ec);
    // The standard headers LibTorch's use: a clang too old for this libstdc++ fails on some of them.
    if (std::ofstream out(dir / "probe.h"); out) {
      for (const char* header : {"algorithm", "array", "atomic", "chrono", "complex", "functional", "iostream", "map",
                                 "memory", "mutex", "optional", "sstream", "string", "tuple", "type_traits",
                                 "unordered_map", "variant", "vector"}) {
        out << "#include <" << header << ">\n";
      }
    }
    if (std::ofstream out(dir / "probe.cpp"); out) {
      out << "std::string crl_probe() { std::vector<std::string> v(2, std::string(64, 'x')); return v[0] + v[1]; }\n";
    }
    // Why it cannot stand in is said once (the answer is then remembered in the cache folder):
    // a clang that finds no libstdc++ or one too new for it, on a machine where it was expected.
    const auto run = [&](std::vector<std::string> argv) {
      const CommandResult r = run_command(argv, {.timeout = std::chrono::seconds(120), .working_dir = dir.string()});
      if (!r.ok()) {
        spdlog::warn("{} cannot compile host sections with {}'s libstdc++ here, so {} does ({} failed: {})", clangxx, cxx, cxx,
                     argv[0], r.output.substr(0, 600));
      }
      return r.ok();
    };
    const bool works =
        run({real, "-std=c++20", "-fPIC", "-x", "c++-header", "probe.h", "-fpch-instantiate-templates", "-o", "probe.h.pch"}) &&
        run({real, "-std=c++20", "-fPIC", "-include-pch", "probe.h.pch", "-c", "probe.cpp", "-o", "probe.o"}) &&
        run({cxx, "-shared", "-Wl,-z,defs", "probe.o", "-o", "probe.so"});
    fs::remove_all(dir, ec);
    return std::string(works ? "yes" : "no");
  });
  return answer == "yes";
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
