// Compiling programs to shared libraries: host (g++ + LibTorch, precompiled prelude) and device
// (nvcc, or g++ with OpenMP) halves in parallel, a content-addressed per-node cache, a thread pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "compile/torch_extension.h"
#include "program/program_text.h"

namespace crl {

enum class Backend { cpu, cuda };
std::string backend_name(Backend backend);
// "cpu" or "cuda"; throws InputError for anything else.
Backend parse_backend(const std::string& name);

struct CompileRequest {
  ProgramText program;
  size_t num_args = 0;      // the task's forward arity (TaskSpec::num_args)
  Backend backend = Backend::cuda;
  std::string cuda_arch;    // "sm_90a"...; empty: the compiler's default (CompilerOptions::cuda_arch)
};

struct CompileResult {
  bool ok = false;
  std::string library_path;  // the .so in the cache (when ok)
  std::vector<std::string> object_paths;  // the program's own objects beside it (host.o, device.o), for the symbol guard
  std::string log;           // compiler output (truncated), with the .crl file's own line numbers
  std::string key;           // SHA-256 cache key
  std::string stage;         // where it failed: "host", "device", "link"; "" when ok
  double seconds = 0;        // wall time of this call (lookup, or the whole compile)
  bool cache_hit = false;
};

struct CompilerOptions {
  // Empty: $CRL_CACHE_DIR, else ~/.cache/crl/compile. Best on a node-local disk: each backend's
  // precompiled prelude is ~400 MB, read by every host compile.
  std::string cache_dir;
  size_t jobs = 0;                // pool threads; 0: the machine's hardware threads
  // Compiler processes running at once on the whole node, whoever started them (NodeSlots):
  // 0: $CRL_NODE_COMPILE_SLOTS, else the hardware threads; the slots' lock files live in
  // node_slots_dir (default: default_node_slots_dir()).
  int node_slots = 0;
  std::string node_slots_dir;
  std::string cuda_arch;          // default for requests; empty: the local GPU's (sm_90a without one)
  double timeout_seconds = 300;   // per compiler invocation; longer fails, remembered for this limit
  size_t max_log_bytes = 16384;   // longer compiler logs keep their head and say how much was cut
  // Toolchain; empty fields take what crl was built with.
  std::string cxx;                // g++
  // Host sections' compiler: "" or "auto" ($CRL_HOST_CXX when set): clang++ where it works (a
  // host compile about 2 s shorter), else cxx; a name or path forces it (e.g. "g++").
  std::string host_cxx;
  std::string nvcc;
  // load_inline's CUDA sources' compiler besides nvcc (compile/clang_cuda.h): "" or "auto"
  // ($CRL_CUDA_CLANG when set): a clang++ 19 or later where there is one; "none": nvcc only; a name
  // or path forces it.
  std::string cuda_clang;
  std::string torch_include_dir;  // LibTorch's include/
  std::string torch_library_dir;  // LibTorch's lib/
  std::string cuda_home;          // /usr/local/cuda
  // A program's compilers read only the toolchain, the prelude and the program, and write only its
  // build folder (Landlock, where the kernel has it and a probe compile passes; else the log says
  // why once). Off only for finding out whether it is what breaks a compile.
  bool sandbox = true;
};

class Compiler {
 public:
  explicit Compiler(CompilerOptions options = {});
  ~Compiler();
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  // Compiles (or finds in the cache) one program. A program that does not compile gives ok=false
  // with the log, and is cached like a success, unless a compiler was killed (then the next
  // request tries again) or timed out (then requests under the same or a shorter limit get the
  // remembered timeout; a longer limit tries again). A broken toolchain (compiler missing, PCH build failing, cache
  // not writable) throws crl::Error.
  CompileResult compile(const CompileRequest& request);
  // compile() on the pool; identical requests in flight share one compile.
  std::future<CompileResult> submit(CompileRequest request);

  // A KernelBench-format candidate's load_inline extension, built as torch builds it (main.cpp and
  // cuda.cu, torch's and the embedded Python's headers, linked with LibTorch and libtorch_python)
  // into program.so in the cache, with the same sandbox, cache and node slots as a program. A
  // request extension_request_problem refuses, or a crl built without Python headers, gives ok=false
  // with the reason as the log (stage "request").
  CompileResult compile_extension(const ExtensionRequest& request);

  // The cache key compile() would use (no compiler is run).
  std::string key_of(const CompileRequest& request);
  const CompilerOptions& options() const;
  // The compiler of the host sections that compile() uses (clang++ or g++: CompilerOptions::host_cxx).
  const std::string& host_cxx() const;
  // The clang++ that builds load_inline's CUDA sources before nvcc is tried; "" for nvcc only.
  const std::string& cuda_clang() const;
  // Builds the precompiled prelude for a backend now (compile() does it on first use).
  void prepare(Backend backend);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// The default cache directory: $CRL_CACHE_DIR, else $HOME/.cache/crl/compile.
std::string default_compile_cache_dir();

}  // namespace crl
