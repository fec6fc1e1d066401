// The compiler: cache lookup, precompiled prelude, parallel host/device compiles in a Landlock
// sandbox, link, thread pool.
#include "compile/compiler.h"
#include "compile/node_slots.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "compile/clang_cuda.h"
#include "compile/compile_cache.h"
#include "compile/generated_source.h"
#include "compile/program_abi.h"
#include "compile/toolchain.h"
#include "core/atomic_file.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/hash.h"
#include "core/landlock.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"

namespace crl {

namespace fs = std::filesystem;

std::string backend_name(Backend backend) { return backend == Backend::cuda ? "cuda" : "cpu"; }

Backend parse_backend(const std::string& name) {
  if (name == "cpu") return Backend::cpu;
  if (name == "cuda") return Backend::cuda;
  throw InputError(fmt::format("unknown backend '{}' (expected cpu or cuda)", name));
}

std::string default_compile_cache_dir() {
  if (const char* dir = std::getenv("CRL_CACHE_DIR"); dir != nullptr && *dir != '\0') return dir;
  const char* home = std::getenv("HOME");
  return fmt::format("{}/.cache/crl/compile", home != nullptr && *home != '\0' ? home : "/tmp");
}

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> split_flags(const std::string& flags) {
  std::vector<std::string> out;
  std::istringstream in(flags);
  std::string flag;
  while (in >> flag) out.push_back(flag);
  return out;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

void write_text(const std::string& path, const std::string& text) { write_file_atomically(path, text, /*durable=*/false); }

// torch's own nvcc macros for extensions (cpp_extension.COMMON_NVCC_FLAGS), given to clang's CUDA mode too.
constexpr const char* kTorchNvccDefines[] = {"-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
                                             "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__"};

// What load_inline's main.cpp includes first, precompiled once per node (ensure_extension_pch).
constexpr const char* kExtensionPrelude = "#include <torch/extension.h>\n";

// Empty when every #include, #include_next and #embed of the program names a header by a
// relative path without "..", and it embeds no file with .incbin; else a message naming the line.
std::string file_inclusion_outside_the_toolchain(const ProgramText& program) {
  static const std::regex directive(R"re(^\s*#\s*(include_next|include|embed)\s*[<"]([^>"]*)[>"])re");
  static const std::regex has_include(R"re(__has_include(_next)?\s*\(\s*[<"]([^>"]*)[>"])re");
  static const std::regex incbin(R"re(\.incbin\b)re");
  for (const SourceSection* section : {&program.device, &program.host}) {
    std::istringstream lines(section->text);
    std::string line;
    for (int n = std::max(section->first_line, 1); std::getline(lines, line); ++n) {
      std::smatch m;
      std::string path;
      if (std::regex_search(line, m, directive) || std::regex_search(line, m, has_include)) path = m[2].str();
      const bool outside = !path.empty() && (path[0] == '/' || path.find("..") != std::string::npos);
      if (outside || std::regex_search(line, incbin)) {
        return fmt::format("{}:{}: crl: programs may include the toolchain's headers only (a relative path, no \"..\", "
                           "no .incbin): refused before compiling",
                           program.origin.empty() ? "program" : program.origin, n);
      }
    }
  }
  return "";
}

// A fixed-size pool of threads running queued tasks in order.
class ThreadPool {
 public:
  explicit ThreadPool(size_t threads) {
    for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { run(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    ready_.notify_all();
    for (auto& w : workers_) w.join();
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      tasks_.push_back(std::move(task));
    }
    ready_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, and every queued compile has run
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();
    }
  }
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

struct Compiler::Impl {
  CompilerOptions options;
  Toolchain toolchain;
  std::unique_ptr<CompileCache> cache;
  std::string cxx_version, host_cxx_version, nvcc_version;
  bool host_is_clang = false;  // clang++ compiles the host sections (toolchain.h: clang_can_compile_host)
  std::mutex pch_mutex;
  std::map<std::string, std::string> pch_header;  // PCH key -> prelude header path (its .gch or .pch beside it)
  std::mutex inflight_mutex;
  std::map<std::string, std::vector<std::promise<CompileResult>>> inflight;  // key -> waiting duplicates
  std::unique_ptr<ThreadPool> pool;
  std::unique_ptr<NodeSlots> node_slots;
  bool use_gold = false;  // gold links against LibTorch's 450 MB libraries about twice as fast as bfd
  std::mutex sandbox_mutex;
  std::map<Backend, bool> sandbox_checked, sandbox_works;  // per backend, after its probe
  // clang++ 19 or later for load_inline's cuda.cu (clang_cuda.h); "" where there is none.
  std::string cuda_clang, cuda_clang_version;
  int cuda_major = 0;  // the toolkit's major version (nvcc's), for fatbinary's arguments
  // variant key -> folder of device.pch, host.pch, shim/; "" where it could not be built (said once)
  std::map<std::string, std::string> clang_cuda_pch;

  static bool names(const CompileRequest& request, const char* library) {
    return request.program.host.text.find(library) != std::string::npos;
  }

  // The request's arch, else the options', else the local GPU's; validated.
  std::string arch_for(const std::string& requested) const {
    std::string arch = requested.empty() ? options.cuda_arch : requested;
    if (arch.empty()) arch = local_cuda_arch();
    validate_cuda_arch(arch);
    return arch;
  }
  std::string arch_of(const CompileRequest& request) const { return arch_for(request.cuda_arch); }

  void require_nvcc() const {
    if (toolchain.nvcc.empty()) {
      throw Error("the CUDA backend needs nvcc, which is not on PATH (install the CUDA toolkit or set "
                  "CompilerOptions::nvcc)");
    }
  }

  // Flags shared by the prelude's PCH and every host compile: they must match exactly.
  std::vector<std::string> host_flags(Backend backend) const {
    std::vector<std::string> flags = {"-std=c++20", "-O3", "-fPIC", "-fvisibility=hidden"};
    for (auto& f : split_flags(toolchain.torch_cxx_flags)) flags.push_back(f);
    flags.push_back(backend == Backend::cuda ? "-DCRL_CUDA=1" : "-DCRL_CUDA=0");
    flags.push_back("-isystem");
    flags.push_back(toolchain.torch_include_dir);
    if (backend == Backend::cuda) {
      flags.push_back("-isystem");
      flags.push_back(toolchain.cuda_home + "/include");
    }
    return flags;
  }

  std::vector<std::string> device_flags(Backend backend, const std::string& arch) const {
    if (backend == Backend::cuda) {
      // -ccbin: nvcc's host side uses the same g++ as the host half (not whichever g++ is first on
      // PATH), so both objects agree on the C++ runtime they link with.
      // Machine code for this GPU only (sm_90a -> compute_90a, code=sm_90a): the library is cached
      // per arch and never JIT-compiled, and `-arch=sm_90a` alone also makes compute_90 PTX, which
      // costs nvcc a second preprocess and cicc pass (about a third of a small program's compile).
      const std::string virtual_arch = "compute_" + arch.substr(3);
      return {"-ccbin", toolchain.cxx, "-O3", "-std=c++17", "-gencode", "arch=" + virtual_arch + ",code=" + arch,
              "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", "-DCRL_CUDA=1"};
    }
    return {"-std=c++20", "-O3", "-march=native", "-fopenmp", "-fPIC", "-fvisibility=hidden", "-DCRL_CUDA=0"};
  }

  // -z defs turns a launcher the device section lacks into a link error (not a dlopen failure).
  // cuBLAS and cuDNN are linked only for programs that name them: their libraries are large and
  // slow for the linker to scan.
  std::vector<std::string> link_flags(Backend backend, bool uses_cublas, bool uses_cudnn) const {
    std::vector<std::string> flags = {"-shared", "-Wl,-z,defs", "-Wl,--as-needed",
                                      "-L" + toolchain.torch_library_dir, "-Wl,-rpath," + toolchain.torch_library_dir,
                                      "-ltorch_cpu", "-lc10"};
    if (use_gold) flags.insert(flags.begin(), "-fuse-ld=gold");
    if (backend == Backend::cuda) {
      const std::string cuda_lib = toolchain.cuda_home + "/lib64";
      for (const auto& f : {"-ltorch_cuda", "-lc10_cuda"}) flags.push_back(f);
      for (const auto& f : {"-L" + cuda_lib, "-Wl,-rpath," + cuda_lib}) flags.push_back(f);
      flags.push_back("-lcudart");
      if (uses_cublas) {
        flags.push_back("-lcublas");
        flags.push_back("-lcublasLt");
      }
      if (uses_cudnn) flags.push_back("-lcudnn");
    } else {
      flags.push_back("-fopenmp");
    }
    return flags;
  }

  std::string pch_key(Backend backend) const {
    Sha256 h;
    h.field("crl-prelude-pch/1").field(prelude_header_source(backend)).field(join(host_flags(backend)));
    h.field(toolchain.host_cxx).field(host_cxx_version).field(toolchain.torch_version);
    return h.hex();
  }

  std::string key_of(const CompileRequest& request) {
    const Backend backend = request.backend;
    if (request.num_args == 0) throw InputError(fmt::format("{}: compile request with num_args 0", request.program.origin));
    if (!request.program.host.present) {
      throw InputError(fmt::format("{}: compile request without a host section", request.program.origin));
    }
    Sha256 h;
    // Version 2: entries keep the program's objects beside its library (for the symbol guard).
    // Version 3: whether the compilers ran sandboxed (a log made without it may hold a file's text).
    h.field("crl-compile/3").field(program_abi_version()).field(backend_name(backend));
    h.field(std::to_string(request.num_args));
    h.field(std::to_string(request.program.host.first_line)).field(request.program.host.text);
    h.field(request.program.device.present ? std::to_string(request.program.device.first_line) : "-");
    h.field(request.program.device.text);
    h.field(toolchain.cxx).field(cxx_version).field(toolchain.torch_version).field(toolchain.torch_include_dir);
    h.field(toolchain.host_cxx).field(host_cxx_version);
    h.field(join(host_flags(backend))).field(join(link_flags(backend, names(request, "cublas"), names(request, "cudnn"))));
    if (backend == Backend::cuda) {
      require_nvcc();
      const std::string arch = arch_of(request);
      h.field(toolchain.nvcc).field(nvcc_version).field(arch).field(join(device_flags(backend, arch)));
    } else {
      h.field(cpu_fingerprint()).field(join(device_flags(backend, "")));
    }
    // (after require_nvcc: a machine without nvcc says so, not that the CUDA prelude failed)
    h.field(sandbox_on(backend) ? "sandboxed" : "unsandboxed");
    return h.hex();
  }

  CommandResult run_tool(const std::vector<std::string>& argv, const std::string& dir, double timeout_seconds = 0,
                         int landlock_ruleset = -1) const {
    // One of the node's compiler slots for as long as the tool runs (the node's budget, shared
    // with every other process on it; the pool's threads only bound this process).
    const NodeSlots::Hold hold(*node_slots);
    CommandOptions o;
    if (timeout_seconds <= 0) timeout_seconds = options.timeout_seconds;
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
    o.working_dir = dir;
    o.max_output = std::max<size_t>(options.max_log_bytes * 4, 65536);
    // Compilers write localized, coloured messages otherwise.
    // Their temporary files in the build folder, the one place a sandboxed compile may write.
    o.env = {{"LC_ALL", "C"}, {"GCC_COLORS", ""}, {"TMPDIR", dir}};
    o.landlock_ruleset = landlock_ruleset;
    return run_command(argv, o);
  }

  // g++ finds header.gch beside the header it is told to include; clang++ is given its .pch.
  std::string pch_file(const std::string& header) const { return header + (host_is_clang ? ".pch" : ".gch"); }

  // Builds the backend's precompiled prelude once per node (ensure_prelude).
  std::string ensure_pch(Backend backend) {
    return ensure_prelude(pch_key(backend), "crl_prelude.h", prelude_header_source(backend), host_flags(backend),
                          fmt::format("the {} precompiled prelude", backend_name(backend)));
  }

  // torch/extension.h precompiled for load_inline extensions' main.cpp (their host file's flags
  // without the request's own; extension_uses_pch says when a request may use it), torch's own or the
  // light one (ExtensionHeaders; its folder's shim/ holds it, searched first: extension_shim_flags).
  std::string ensure_extension_pch(bool cuda, ExtensionHeaders headers) {
    ExtensionRequest base;
    base.cuda = cuda;
    const std::vector<std::string> flags = extension_host_flags(base);
    Sha256 h;
    h.field("crl-extension-pch/2").field(kExtensionPrelude).field(join(flags));
    h.field(toolchain.host_cxx).field(host_cxx_version).field(toolchain.torch_version);
    if (headers == ExtensionHeaders::light) h.field("light").field(kLightTorchExtensionHeader);
    const std::string key = h.hex();
    std::vector<std::string> prelude_flags = extension_shim_flags(cache->pch_dir(key), headers);
    prelude_flags.insert(prelude_flags.end(), flags.begin(), flags.end());
    std::vector<std::pair<std::string, std::string>> files;
    if (headers == ExtensionHeaders::light) files.emplace_back("shim/torch/extension.h", kLightTorchExtensionHeader);
    return ensure_prelude(key, "crl_extension_prelude.h", kExtensionPrelude, prelude_flags,
                          fmt::format("{} torch/extension.h precompiled for {} extensions",
                                      headers == ExtensionHeaders::light ? "the light" : "torch's own", cuda ? "cuda" : "cpu"),
                          files);
  }

  // The flags that put an extension prelude's shim/ first (the light header), none for torch's own.
  static std::vector<std::string> extension_shim_flags(const std::string& prelude_dir, ExtensionHeaders headers) {
    if (headers == ExtensionHeaders::torch) return {};
    return {"-isystem", prelude_dir + "/shim"};
  }

  // Builds a precompiled header once per node: under a lock, into a temporary file renamed into
  // place, so concurrent processes neither race nor read a half-written .gch.
  // `files` (relative path -> text) are written into its folder first.
  std::string ensure_prelude(const std::string& key, const std::string& file_name, const std::string& source,
                             const std::vector<std::string>& flags, const std::string& what,
                             const std::vector<std::pair<std::string, std::string>>& files = {}) {
    std::lock_guard guard(pch_mutex);
    if (const auto it = pch_header.find(key); it != pch_header.end()) return it->second;
    const std::string dir = cache->pch_dir(key);
    const std::string header = dir + "/" + file_name;
    const std::string gch = pch_file(header);
    fs::create_directories(dir);
    if (!fs::exists(gch)) {
      FileLock lock(dir + "/build.lock");
      if (!fs::exists(gch)) {
        write_text(header, source);
        for (const auto& [name, text] : files) {
          fs::create_directories(fs::path(dir + "/" + name).parent_path());
          write_text(dir + "/" + name, text);
        }
        const std::string tmp = fmt::format("{}.tmp{}", gch, static_cast<long>(getpid()));
        std::vector<std::string> argv = {toolchain.host_cxx};
        for (auto& f : flags) argv.push_back(f);
        for (const auto& f : {"-x", "c++-header", header.c_str(), "-o", tmp.c_str()}) argv.push_back(f);
        if (host_is_clang) argv.push_back("-fpch-instantiate-templates");
        // A prelude takes tens of seconds; a program's short timeout must not fail it.
        const CommandResult r = run_tool(argv, dir, std::max(options.timeout_seconds, 1800.0));
        if (!r.ok()) {
          std::error_code ec;
          fs::remove(tmp, ec);
          throw Error(fmt::format("building {} failed ({}){}:\n{}\n{}", what, r.timed_out ? "timed out" : fmt::format("exit {}", r.exit_code),
                                  host_is_clang ? " with clang++ (CRL_HOST_CXX=g++ compiles host sections with g++)" : "",
                                  join(argv), r.output.substr(0, 8000)));
        }
        fs::rename(tmp, gch);
      }
    }
    pch_header[key] = header;
    return header;
  }

  std::string clean_log(std::string log, const std::string& build_dir) const {
    // Generated file paths are private temporaries: show their base names only.
    const std::string prefix = build_dir + "/";
    for (size_t pos = log.find(prefix); pos != std::string::npos; pos = log.find(prefix, pos)) {
      log.erase(pos, prefix.size());
    }
    if (log.size() > options.max_log_bytes) {
      const size_t cut = log.size() - options.max_log_bytes;
      log.resize(options.max_log_bytes);
      log += fmt::format("\n[crl: {} more bytes of compiler output cut]\n", cut);
    }
    return log;
  }

  // What a program's compilers may touch (issue #13): read the toolchain, the prelude and the
  // program; write only its build folder; nothing else of the machine. A program that names a file
  // by a macro (`#define P "/etc/passwd"` then `#include P`, which the textual check cannot see)
  // would otherwise put that file's text into its compile log, the verdict and the results file,
  // or make the compiler read /dev/zero until its timeout.
  LandlockRules compile_rules(const std::string& build_dir, const std::string& pch_dir, const std::string& other_pch_dir = "") const {
    LandlockRules rules;
    rules.readable = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/ld.so.conf",
                      "/etc/ld.so.conf.d", "/proc", pch_dir, build_dir};
    if (!other_pch_dir.empty()) rules.readable.push_back(other_pch_dir);
    const auto add = [&rules](const fs::path& path) {
      std::error_code ec;
      const fs::path real = fs::canonical(path, ec);
      if (!ec && !real.empty()) rules.readable.push_back(real.string());
    };
    // Each tool's installation (the folder above its bin/), LibTorch's package, CUDA's, and the
    // folders the loader searches (a carried clang's libraries).
    for (const std::string& tool : {toolchain.cxx, toolchain.host_cxx, toolchain.nvcc, cuda_clang}) {
      std::error_code ec;
      if (!tool.empty()) add(fs::canonical(tool, ec).parent_path().parent_path());
    }
    if (!toolchain.torch_include_dir.empty()) add(fs::path(toolchain.torch_include_dir).parent_path());
    if (!toolchain.torch_library_dir.empty()) add(toolchain.torch_library_dir);
    if (!toolchain.cuda_home.empty()) add(toolchain.cuda_home);
    if (!toolchain.python_include_dir.empty()) add(toolchain.python_include_dir);  // torch extensions
    if (const char* paths = std::getenv("LD_LIBRARY_PATH"); paths != nullptr) {
      std::istringstream in(paths);
      for (std::string dir; std::getline(in, dir, ':');) {
        if (!dir.empty()) add(dir);
      }
    }
    rules.writable_dirs = {build_dir};
    rules.writable_files = {"/dev/null"};
    return rules;
  }

  // The compile sandbox is tried once per toolchain on a known-good program (a pass is remembered on
  // disk beside the compiler versions): where the kernel has no Landlock, or the toolchain needs a
  // folder the rules above miss, this process compiles programs without it and its log says why.
  bool sandbox_on(Backend backend) {
    if (!options.sandbox) return false;
    std::lock_guard guard(sandbox_mutex);
    if (!sandbox_checked.count(backend)) {
      sandbox_works[backend] = probe_compile_sandbox(backend, ensure_pch(backend));
      sandbox_checked[backend] = true;
    }
    return sandbox_works[backend];
  }

  // `pch_root`: the folder of all the cache's precompiled headers, which a load_inline build reads
  // (main.cpp's two torch/extension.h, clang's CUDA headers), or "".
  int compile_ruleset(Backend backend, const std::string& build_dir, const std::string& pch, const std::string& pch_root) {
    if (!sandbox_on(backend)) return -1;
    return build_landlock_ruleset(compile_rules(build_dir, fs::path(pch).parent_path().string(), pch_root), nullptr);
  }

  bool probe_compile_sandbox(Backend backend, const std::string& pch) {
    std::string why;
    if (landlock_abi(&why) == 0) {
      spdlog::warn("crl compile: programs compile without a sandbox: {}", why);
      return false;
    }
    Sha256 h;
    h.field("compile-sandbox/1").field(backend_name(backend)).field(toolchain.host_cxx).field(host_cxx_version);
    h.field(toolchain.cxx).field(cxx_version).field(toolchain.nvcc).field(nvcc_version).field(pch);
    for (const auto& path : compile_rules("-", "-").readable) h.field(path);
    const std::string memo = fmt::format("{}/toolchains/compile-sandbox-{}", options.cache_dir, h.hex().substr(0, 24));
    if (fs::exists(memo)) return true;
    CompileRequest probe;
    probe.backend = backend;
    probe.num_args = 1;
    probe.program.origin = "crl's compile-sandbox probe";
    probe.program.host = {true, "at::Tensor forward(const at::Tensor& x) { return x; }\n", 1};
    if (backend == Backend::cuda && !toolchain.nvcc.empty()) probe.program.device = {true, "__global__ void crl_sandbox_probe() {}\n", 1};
    const std::string dir = cache->make_build_dir();
    std::string log;
    bool ok = false;
    try {
      std::string why_not;
      const int ruleset = build_landlock_ruleset(compile_rules(dir, fs::path(pch).parent_path().string()), &why_not);
      if (ruleset < 0) throw Error(why_not);
      bool transient = false, timed_out = false;
      const CompileResult r = compile_in(dir, probe, pch, ruleset, &transient, &timed_out);
      close(ruleset);
      ok = r.ok;
      log = r.log;
    } catch (const std::exception& e) {
      log = e.what();
    }
    remove_tree(dir);
    // Only a pass is remembered: a failure may be the node's (a timeout on a loaded machine), so
    // the next process tries again, and says so again.
    if (ok) {
      fs::create_directories(fs::path(memo).parent_path());
      write_text(memo, "ok\n");
    } else {
      spdlog::warn("crl compile: the compile sandbox broke a known-good {} program, so programs compile without it "
                   "(a folder the toolchain needs is missing from its rules; CompilerOptions::sandbox):\n{}",
                   backend_name(backend), log.substr(0, 2000));
    }
    return ok;
  }

  // Compiles `request` in `dir` (host and device in parallel, then the link) with each tool
  // restricted to `ruleset` (-1: none). *transient: a failure that says nothing certain about the
  // program (a timeout, a signal).
  CompileResult compile_in(const std::string& dir, const CompileRequest& request, const std::string& pch, int ruleset,
                           bool* transient_out, bool* timed_out_out) {
    const Backend backend = request.backend;
    const std::string host_cpp = dir + "/host.cpp";
    write_text(host_cpp, host_source(request.program, request.num_args, program_abi_version()));
    const std::string device_text = device_source(request.program, backend);
    const std::string device_file = dir + (backend == Backend::cuda ? "/device.cu" : "/device.cpp");
    if (!device_text.empty()) write_text(device_file, device_text);

    std::vector<std::string> host_argv = {toolchain.host_cxx};
    for (auto& f : host_flags(backend)) host_argv.push_back(f);
    if (host_is_clang) {
      for (const auto& f : {std::string("-include-pch"), pch_file(pch)}) host_argv.push_back(f);
    } else {
      for (const auto& f : {std::string("-Winvalid-pch"), std::string("-include"), pch}) host_argv.push_back(f);
    }
    for (const auto& f : {std::string("-c"), host_cpp, std::string("-o"), dir + "/host.o"}) host_argv.push_back(f);
    std::vector<std::string> device_argv;
    if (!device_text.empty()) {
      device_argv = {backend == Backend::cuda ? toolchain.nvcc : toolchain.cxx};
      for (auto& f : device_flags(backend, backend == Backend::cuda ? arch_of(request) : "")) device_argv.push_back(f);
      for (const auto& f : {std::string("-c"), device_file, std::string("-o"), dir + "/device.o"}) device_argv.push_back(f);
    }
    std::vector<std::string> link_argv = {toolchain.cxx, "-o", dir + "/program.so", dir + "/host.o"};
    if (!device_text.empty()) link_argv.push_back(dir + "/device.o");
    for (auto& f : link_flags(backend, names(request, "cublas"), names(request, "cudnn"))) link_argv.push_back(f);
    return run_build(dir, tool_step(host_argv, dir, ruleset), tool_step(device_argv, dir, ruleset), link_argv, ruleset, transient_out,
                     timed_out_out);
  }

  // One tool's run as a build step; no step for an empty argv.
  using BuildStep = std::function<CommandResult()>;
  BuildStep tool_step(const std::vector<std::string>& argv, const std::string& dir, int ruleset) const {
    if (argv.empty()) return {};
    return [this, argv, dir, ruleset] { return run_tool(argv, dir, 0, ruleset); };
  }

  // Runs the host and device compiles in parallel (no device compile without its step), then the
  // link, each restricted to `ruleset`; the result's log and failing stage.
  CompileResult run_build(const std::string& dir, const BuildStep& host_step, const BuildStep& device_step,
                          const std::vector<std::string>& link_argv, int ruleset, bool* transient_out, bool* timed_out_out) {
    CompileResult result;
    std::future<CommandResult> device_run;
    if (device_step) device_run = std::async(std::launch::async, device_step);
    const CommandResult host = host_step();
    const CommandResult device = device_run.valid() ? device_run.get() : CommandResult{0, 0, false, "", 0};
    std::string log;
    // A compiler killed by the timeout or a signal (the OOM killer, a loaded node) says nothing
    // certain about the program, so such a failure is reported but not cached.
    bool transient = false, timed_out = false;
    const auto describe = [&transient, &timed_out](const char* what, const CommandResult& r) {
      if (r.exit_code == -1 && r.signal == 0 && !r.timed_out) {
        throw Error(fmt::format("the {} compiler could not be started: {}", what, r.output));
      }
      if (r.timed_out || r.signal != 0) transient = true;
      if (r.timed_out) timed_out = true;
      if (r.timed_out) return fmt::format("[crl: {} compile timed out]\n", what);
      if (r.signal != 0) return fmt::format("[crl: {} compiler killed by signal {}]\n", what, r.signal);
      return std::string();
    };
    if (!host.ok() || !device.ok()) {
      result.stage = !device.ok() ? "device" : "host";
      if (!device.ok()) log += describe("device", device) + device.output;
      if (!host.ok()) log += describe("host", host) + host.output;
      result.ok = false;
    } else {
      log = host.output + device.output;  // warnings, if any
      const CommandResult link = run_tool(link_argv, dir, 0, ruleset);
      if (!link.ok()) {
        result.stage = "link";
        log += describe("link", link) + link.output;
      }
      result.ok = link.ok();
    }
    result.log = clean_log(log, dir);
    *transient_out = transient;
    *timed_out_out = timed_out;
    return result;
  }

  CompileResult build(const CompileRequest& request, const std::string& key) {
    const std::string pch = ensure_pch(request.backend);
    return build_in_dir(request.backend, pch, key, request.program.origin,
                        [&](const std::string& dir, int ruleset, bool* transient, bool* timed_out) {
                          return compile_in(dir, request, pch, ruleset, transient, timed_out);
                        });
  }

  // A fresh build folder under the compile sandbox (`pch`'s folder readable), `compile` run in it,
  // and its result published into the cache as `key`: a failure drops its objects (a success keeps
  // them for the symbol guard); a transient one (timeout, signal) is not cached, a timeout remembered
  // with its limit (compile_cache.h).
  CompileResult build_in_dir(Backend backend, const std::string& pch, const std::string& key, const std::string& origin,
                             const std::function<CompileResult(const std::string&, int, bool*, bool*)>& compile,
                             const std::string& pch_root = "") {
    const std::string dir = cache->make_build_dir();
    CompileResult result;
    int ruleset = -1;
    try {
      ruleset = compile_ruleset(backend, dir, pch, pch_root);
      bool transient = false, timed_out = false;
      result = compile(dir, ruleset, &transient, &timed_out);
      if (ruleset >= 0) close(ruleset);
      ruleset = -1;
      if (!result.ok) {
        std::error_code ec;
        fs::remove(dir + "/host.o", ec);
        fs::remove(dir + "/device.o", ec);
      }
      if (transient) {
        remove_tree(dir);
        result.key = key;
        if (timed_out) cache->remember_timeout(key, origin, options.timeout_seconds, result);
        return result;
      }
    } catch (...) {
      if (ruleset >= 0) close(ruleset);
      remove_tree(dir);
      throw;
    }
    return cache->publish(dir, key, origin, result);
  }

  std::string extension_key(const ExtensionRequest& r) {
    const Backend backend = r.cuda ? Backend::cuda : Backend::cpu;
    Sha256 h;
    h.field("crl-extension/1").field(backend_name(backend)).field(r.name).field(r.cpp_source).field(r.cuda_source);
    h.field(r.bindings ? "bindings" : "no bindings");
    for (const auto* list : {&r.functions, &r.extra_cflags, &r.extra_cuda_cflags, &r.extra_ldflags}) h.field(join(*list)).field("|");
    h.field(toolchain.cxx).field(cxx_version).field(toolchain.host_cxx).field(host_cxx_version);
    h.field(toolchain.torch_version).field(toolchain.torch_include_dir).field(toolchain.python_include_dir);
    h.field(join(extension_host_flags(r)));
    if (r.cuda) {
      require_nvcc();
      h.field(toolchain.nvcc).field(nvcc_version).field(arch_for(r.cuda_arch)).field(cuda_clang).field(cuda_clang_version);
    }
    h.field(sandbox_on(backend) ? "sandboxed" : "unsandboxed");
    return h.hex();
  }

  // As torch's own extension builds: C++17, its macros, its and the embedded Python's headers; the
  // module's init function must stay visible (no -fvisibility=hidden).
  std::vector<std::string> extension_defines(const ExtensionRequest& r) const {
    // TORCH_EXTENSION_NAME is main.cpp's first line (extension_main_source), not a flag: the
    // precompiled torch/extension.h then serves every extension.
    std::vector<std::string> flags = {"-DTORCH_API_INCLUDE_EXTENSION_H"};
    for (auto& f : split_flags(toolchain.torch_cxx_flags)) flags.push_back(f);
    for (const auto& dir : {toolchain.torch_include_dir, toolchain.torch_include_dir + "/torch/csrc/api/include", toolchain.python_include_dir}) {
      flags.push_back("-isystem");
      flags.push_back(dir);
    }
    if (r.cuda) {
      flags.push_back("-isystem");
      flags.push_back(toolchain.cuda_home + "/include");
    }
    return flags;
  }

  std::vector<std::string> extension_host_flags(const ExtensionRequest& r) const {
    std::vector<std::string> flags = {"-std=c++17", "-O3", "-fPIC"};
    for (auto& f : extension_defines(r)) flags.push_back(f);
    for (const auto& f : r.extra_cflags) flags.push_back(f);
    return flags;
  }

  // Whether the precompiled torch/extension.h serves `r`: its extra flags are all the prelude's own
  // (a -O or -D of its own would not match the header's).
  bool extension_uses_pch(const ExtensionRequest& r) const {
    const std::vector<std::string> base = extension_host_flags(ExtensionRequest{.cuda = r.cuda});
    return std::all_of(r.extra_cflags.begin(), r.extra_cflags.end(),
                       [&base](const std::string& f) { return std::find(base.begin(), base.end(), f) != base.end(); });
  }

  CompileResult build_extension(const ExtensionRequest& r, const std::string& key) {
    const Backend backend = r.cuda ? Backend::cuda : Backend::cpu;
    const bool use_pch = extension_uses_pch(r);
    // Without the extension prelude, the program prelude's folder only serves the sandbox's rules.
    const std::string pch = use_pch ? ensure_extension_pch(r.cuda, ExtensionHeaders::light) : ensure_pch(backend);
    const std::optional<ClangCudaFlags> flags =
        r.cuda_source.empty() || cuda_clang.empty() ? std::nullopt : clang_cuda_flags(r.extra_cuda_cflags, nullptr);
    // Every precompiled header is readable to the build: main.cpp may need torch's own after the
    // light one, cuda.cu clang's.
    const std::string pch_root = fs::path(cache->pch_dir("-")).parent_path().string();
    return build_in_dir(
        backend, pch, key, r.origin,
        [&](const std::string& dir, int ruleset, bool* transient, bool* timed_out) {
          return run_build(dir, extension_host_step(r, dir, ruleset, use_pch ? pch : ""), extension_device_step(r, flags, dir, ruleset),
                           extension_link_argv(r, dir), ruleset, transient, timed_out);
        },
        pch_root);
  }

  // The rule both files of an extension follow: compiled with the light torch/extension.h, then with
  // torch's own where the log names an undeclared name (may_lack_a_declaration). `compile(headers)`
  // gives nullopt where that header cannot serve (it did not build); nullopt where neither did.
  using HeaderCompile = std::function<std::optional<CommandResult>(ExtensionHeaders)>;
  static std::optional<CommandResult> light_header_first(const HeaderCompile& compile) {
    std::optional<CommandResult> light = compile(ExtensionHeaders::light);
    if (light && (light->ok() || !may_lack_a_declaration(light->output))) return light;
    std::optional<CommandResult> own = compile(ExtensionHeaders::torch);
    return own ? own : light;
  }

  // main.cpp's compile with the precompiled torch/extension.h (`light_pch`, then torch's own), or
  // without one where `light_pch` is "".
  BuildStep extension_host_step(const ExtensionRequest& r, const std::string& dir, int ruleset, const std::string& light_pch) {
    if (light_pch.empty()) return tool_step(extension_host_argv(r, dir, "", ExtensionHeaders::torch), dir, ruleset);
    return [this, r, dir, ruleset, light_pch] {
      return *light_header_first([&](ExtensionHeaders headers) -> std::optional<CommandResult> {
        const std::string pch = headers == ExtensionHeaders::light ? light_pch : ensure_extension_pch(r.cuda, headers);
        return run_tool(extension_host_argv(r, dir, pch, headers), dir, 0, ruleset);
      });
    };
  }

  // cuda.cu's compile (none without CUDA sources): by clang's CUDA mode (clang_cuda.h) with the
  // lighter torch/extension.h, then with torch's own, then by nvcc; by nvcc alone without `flags`
  // (no clang 19, a flag without counterpart).
  BuildStep extension_device_step(const ExtensionRequest& r, const std::optional<ClangCudaFlags>& flags, const std::string& dir,
                                  int ruleset) {
    const std::vector<std::string> nvcc_argv = extension_device_argv(r, dir);  // writes cuda.cu
    if (nvcc_argv.empty() || !flags) return tool_step(nvcc_argv, dir, ruleset);
    return [this, r, flags = *flags, dir, ruleset, nvcc_argv] {
      const std::optional<CommandResult> clang = light_header_first([&](ExtensionHeaders headers) -> std::optional<CommandResult> {
        const std::string pch_dir = clang_cuda_pch_for(r, flags, headers);
        if (pch_dir.empty()) return std::nullopt;
        return run_clang_cuda(r, flags, dir, ruleset, pch_dir);
      });
      if (clang && clang->ok()) return *clang;
      // Any other failure of clang's goes to nvcc, whose verdict is the one torch's load_inline would
      // give; clang's log is not shown.
      CommandResult nvcc = run_tool(nvcc_argv, dir, 0, ruleset);
      if (nvcc.ok()) nvcc.output = "[crl: clang's CUDA mode did not build cuda.cu; nvcc did]\n" + nvcc.output;
      return nvcc;
    };
  }

  // The clang driver's command line for cuda.cu or the prelude, without its input and output.
  std::vector<std::string> clang_cuda_argv(const std::string& arch, const std::string& clang_cuda_dir, bool approx_transcendentals) const {
    std::vector<std::string> argv = {cuda_clang, "-x", "cuda", "--cuda-path=" + toolchain.cuda_home, "--cuda-gpu-arch=" + arch,
                                     "-Wno-unknown-cuda-version", "-std=c++17", "-O3", "-fPIC", "-isystem", clang_cuda_dir + "/shim"};
    // CUDA 13 keeps thrust and cub (which torch's headers include) under include/cccl; nvcc adds it itself.
    if (fs::is_directory(toolchain.cuda_home + "/include/cccl")) {
      for (const auto& f : {std::string("-isystem"), toolchain.cuda_home + "/include/cccl"}) argv.push_back(f);
    }
    for (auto& f : extension_defines(ExtensionRequest{.cuda = true})) argv.push_back(f);
    for (const char* f : kTorchNvccDefines) argv.push_back(f);
    if (approx_transcendentals) argv.push_back("-fgpu-approx-transcendentals");
    return argv;
  }

  // The clang jobs of cuda.cu -> device.o, each with its side's precompiled header; the first failing
  // job's result, else the jobs' output.
  CommandResult run_clang_cuda(const ExtensionRequest& r, const ClangCudaFlags& flags, const std::string& dir, int ruleset,
                               const std::string& clang_cuda_dir) {
    std::vector<std::string> driver = clang_cuda_argv(arch_for(r.cuda_arch), clang_cuda_dir, flags.approx_transcendentals);
    driver.insert(driver.begin() + 1, "-###");
    for (const auto& f : flags.driver) driver.push_back(f);
    for (const auto& f : {"-DTORCH_EXTENSION_NAME=" + r.name, std::string("-c"), dir + "/cuda.cu", std::string("-o"), dir + "/device.o"}) {
      driver.push_back(f);
    }
    const CommandResult listed = run_tool(driver, dir, 0, ruleset);
    if (!listed.ok()) return listed;
    const auto jobs = jobs_with_pch(parse_driver_jobs(listed.output), clang_cuda_dir + "/device.pch", clang_cuda_dir + "/host.pch",
                                    flags, cuda_major);
    CommandResult all{0, 0, false, "", 0};
    for (const auto& job : jobs) {
      CommandResult step = run_tool(job, dir, 0, ruleset);
      all.output += step.output;
      all.seconds += step.seconds;
      if (!step.ok()) {
        step.output = all.output;
        remove_driver_temporaries(dir);
        return step;
      }
    }
    if (jobs.empty()) all = CommandResult{1, 0, false, "clang -### listed no jobs:\n" + listed.output, 0};
    remove_driver_temporaries(dir);
    return all;
  }

  // The driver's intermediate files (cuda-*.s, .o, .fatbin in TMPDIR, the build folder), which would
  // otherwise be published into the cache with the library.
  static void remove_driver_temporaries(const std::string& dir) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.path().filename().string().rfind("cuda-", 0) == 0) fs::remove(entry.path(), ec);
    }
  }

  // The folder of clang's precompiled CUDA headers for `r`'s arch and `flags`' variant, built once
  // per node; "" where they did not build.
  std::string clang_cuda_pch_for(const ExtensionRequest& r, const ClangCudaFlags& flags, ExtensionHeaders headers) {
    const std::string arch = arch_for(r.cuda_arch);
    Sha256 h;
    h.field("crl-clang-cuda-pch/1").field(kClangCudaPrelude).field(cuda_clang).field(cuda_clang_version).field(toolchain.cuda_home);
    h.field(nvcc_version).field(toolchain.torch_version).field(toolchain.torch_include_dir).field(arch);
    h.field(flags.approx_transcendentals ? "approx" : "exact");
    h.field(headers == ExtensionHeaders::light ? kLightTorchExtensionHeader : "torch");
    const std::string key = h.hex();
    std::lock_guard guard(pch_mutex);
    if (const auto it = clang_cuda_pch.find(key); it != clang_cuda_pch.end()) return it->second;
    const std::string dir = cache->pch_dir(key);
    if (!fs::exists(dir + "/host.pch")) {
      fs::create_directories(dir + "/shim");
      FileLock lock(dir + "/build.lock");
      if (const std::string failed = fs::exists(dir + "/host.pch") ? "" : build_clang_cuda_pch(dir, arch, flags, headers);
          !failed.empty()) {
        spdlog::warn("crl compile: clang's CUDA mode could not precompile torch's headers, so nvcc builds load_inline's "
                     "CUDA sources ({}; CRL_CUDA_CLANG=none skips clang):\n{}", cuda_clang, failed.substr(0, 3000));
        return clang_cuda_pch[key] = "";
      }
    }
    return clang_cuda_pch[key] = dir;
  }

  // The two precompiled headers of clang_cuda_pch_for, built side by side (host.pch last: it marks
  // the folder complete); "" on success, else what failed.
  std::string build_clang_cuda_pch(const std::string& dir, const std::string& arch, const ClangCudaFlags& flags, ExtensionHeaders headers) {
    for (const auto& [name, text] : clang_cuda_shim_headers(headers)) {
      fs::create_directories(fs::path(dir + "/shim/" + name).parent_path());
      write_text(dir + "/shim/" + name, text);
    }
    write_text(dir + "/prelude.cuh", kClangCudaPrelude);
    std::vector<std::string> driver = clang_cuda_argv(arch, dir, flags.approx_transcendentals);
    driver.insert(driver.begin() + 1, "-###");
    for (const auto& f : {"-c", "prelude.cuh", "-o", "prelude.o"}) driver.push_back(f);
    const CommandResult listed = run_tool(driver, dir);
    if (!listed.ok()) return join(driver) + "\n" + listed.output;
    const std::string tmp = fmt::format(".tmp{}", static_cast<long>(getpid()));
    const auto jobs = pch_emitting_jobs(parse_driver_jobs(listed.output), dir + "/device.pch" + tmp, dir + "/host.pch" + tmp);
    if (jobs.size() != 2) return "clang -### did not list one device and one host compile:\n" + listed.output;
    const double limit = std::max(options.timeout_seconds, 1800.0);  // tens of seconds; a short program timeout must not fail it
    auto first = std::async(std::launch::async, [&] { return run_tool(jobs[0], dir, limit); });
    const CommandResult second = run_tool(jobs[1], dir, limit);
    const CommandResult one = first.get();
    for (const auto* r : {&one, &second}) {
      if (!r->ok()) return fmt::format("{}\n{}", join(r == &one ? jobs[0] : jobs[1]), r->output.substr(0, 4000));
    }
    fs::rename(dir + "/device.pch" + tmp, dir + "/device.pch");
    fs::rename(dir + "/host.pch" + tmp, dir + "/host.pch");
    return "";
  }

  // main.cpp written into `dir` and its compile (with the precompiled `pch` unless "", of `headers`).
  std::vector<std::string> extension_host_argv(const ExtensionRequest& r, const std::string& dir, const std::string& pch,
                                               ExtensionHeaders headers) const {
    write_text(dir + "/main.cpp", extension_main_source(r));
    std::vector<std::string> argv = {toolchain.host_cxx};
    if (!pch.empty()) {
      for (auto& f : extension_shim_flags(fs::path(pch).parent_path().string(), headers)) argv.push_back(f);
    }
    for (auto& f : extension_host_flags(r)) argv.push_back(f);
    if (!pch.empty() && host_is_clang) {
      for (const auto& f : {std::string("-include-pch"), pch_file(pch)}) argv.push_back(f);
    } else if (!pch.empty()) {
      for (const auto& f : {std::string("-Winvalid-pch"), std::string("-include"), pch}) argv.push_back(f);
    }
    for (const auto& f : {std::string("-c"), dir + "/main.cpp", std::string("-o"), dir + "/host.o"}) argv.push_back(f);
    return argv;
  }

  // cuda.cu written into `dir` and its nvcc compile; empty without CUDA sources.
  std::vector<std::string> extension_device_argv(const ExtensionRequest& r, const std::string& dir) const {
    const std::string cuda_text = extension_cuda_source(r);
    if (cuda_text.empty()) return {};
    write_text(dir + "/cuda.cu", cuda_text);
    const std::string arch = arch_for(r.cuda_arch);
    std::vector<std::string> argv = {toolchain.nvcc, "-ccbin", toolchain.cxx, "-O3", "-std=c++17", "-gencode",
                                     "arch=compute_" + arch.substr(3) + ",code=" + arch, "-Xcompiler", "-fPIC",
                                     "--expt-relaxed-constexpr"};
    for (const char* f : kTorchNvccDefines) argv.push_back(f);
    for (auto& f : extension_defines(r)) argv.push_back(f);
    argv.push_back("-DTORCH_EXTENSION_NAME=" + r.name);
    for (const auto& f : r.extra_cuda_cflags) argv.push_back(f);
    for (const auto& f : {std::string("-c"), dir + "/cuda.cu", std::string("-o"), dir + "/device.o"}) argv.push_back(f);
    return argv;
  }

  // The module's link: LibTorch and libtorch_python (CUDA's libraries on the cuda backend), no -z defs
  // (Python's symbols come from the interpreter that imports it).
  std::vector<std::string> extension_link_argv(const ExtensionRequest& r, const std::string& dir) const {
    std::vector<std::string> argv = {toolchain.cxx, "-shared", "-o", dir + "/program.so", dir + "/host.o"};
    if (use_gold) argv.insert(argv.begin() + 1, "-fuse-ld=gold");
    if (!r.cuda_source.empty()) argv.push_back(dir + "/device.o");
    for (const auto& f : {"-L" + toolchain.torch_library_dir, "-Wl,-rpath," + toolchain.torch_library_dir}) argv.push_back(f);
    for (const auto& f : {"-lc10", "-ltorch", "-ltorch_cpu", "-ltorch_python"}) argv.push_back(f);
    if (r.cuda) {
      const std::string cuda_lib = toolchain.cuda_home + "/lib64";
      for (const auto& f : {std::string("-lc10_cuda"), std::string("-ltorch_cuda"), "-L" + cuda_lib, "-Wl,-rpath," + cuda_lib,
                            std::string("-lcudart")}) {
        argv.push_back(f);
      }
    }
    for (const auto& f : r.extra_ldflags) argv.push_back(f);
    return argv;
  }

  CompileResult compile_extension(const ExtensionRequest& r) {
    const auto start = Clock::now();
    const auto refused = [&start](std::string why) {
      CompileResult c;
      c.stage = "request";
      c.log = std::move(why);
      c.seconds = seconds_since(start);
      return c;
    };
    if (toolchain.python_include_dir.empty()) return refused(r.origin + ": this crl was built without Python's headers, so it cannot build load_inline extensions");
    if (std::string why = extension_request_problem(r); !why.empty()) return refused(why);
    ProgramText sources;  // the C++ and CUDA sources, for the check of what they include
    sources.origin = r.origin;
    sources.host = {true, r.cpp_source, 1};
    sources.device = {!r.cuda_source.empty(), r.cuda_source, 1};
    if (std::string why = file_inclusion_outside_the_toolchain(sources); !why.empty()) return refused(why);
    return cached(extension_key(r), r.origin, start, [&](const std::string& key) { return build_extension(r, key); });
  }

  // The cache's entry for `key`, else `build(key)` under the key's lock (another process may have
  // published it, or timed out on it, meanwhile).
  CompileResult cached(const std::string& key, const std::string& origin, Clock::time_point start,
                       const std::function<CompileResult(const std::string&)>& build) {
    if (auto hit = cache->lookup(key, origin)) {
      hit->seconds = seconds_since(start);
      return *hit;
    }
    FileLock lock(cache->lock_path(key));
    if (auto hit = cache->lookup(key, origin)) {
      hit->seconds = seconds_since(start);
      return *hit;
    }
    if (auto timed_out = cache->lookup_timeout(key, origin, options.timeout_seconds)) {
      timed_out->seconds = seconds_since(start);
      return *timed_out;
    }
    CompileResult result = build(key);
    result.seconds = seconds_since(start);
    result.cache_hit = false;
    return result;
  }

  CompileResult compile(const CompileRequest& request) {
    const auto start = Clock::now();
    // A program may include the toolchain's headers, nothing else: a path of its own choosing
    // would put that file's text into the compiler's log, the verdict and the results file.
    if (const std::string why = file_inclusion_outside_the_toolchain(request.program); !why.empty()) {
      CompileResult refused;
      refused.stage = "host";
      refused.log = why;
      refused.seconds = seconds_since(start);
      return refused;
    }
    return cached(key_of(request), request.program.origin, start, [&](const std::string& key) { return build(request, key); });
  }
};

// The host sections' compiler: CompilerOptions::host_cxx, else $CRL_HOST_CXX, else ("auto")
// clang++ when it can stand in for cxx here, else cxx itself.
static std::string choose_host_cxx(const CompilerOptions& options, const std::string& cxx) {
  std::string wanted = options.host_cxx;
  if (wanted.empty()) {
    if (const char* env = std::getenv("CRL_HOST_CXX"); env != nullptr) wanted = env;
  }
  if (wanted.empty() || wanted == "auto") {
    const std::string clang = find_on_path("clang++");
    return !clang.empty() && clang_can_compile_host(clang, cxx, options.cache_dir) ? clang : cxx;
  }
  const std::string found = find_on_path(wanted);
  if (found.empty()) throw InputError(fmt::format("the host compiler '{}' (CRL_HOST_CXX or host_cxx) is not on PATH", wanted));
  return found;
}

// The clang++ of load_inline's CUDA sources (clang_cuda.h): CompilerOptions::cuda_clang, else
// $CRL_CUDA_CLANG ("none": nvcc only), else ("auto") the newest clang++-N on PATH, else the host sections' clang++, of version 19 or later (the
// first whose CUDA mode takes Hopper's sm_90a and CUDA 12.x headers); "" for none.
static std::string choose_cuda_clang(const CompilerOptions& options, const std::string& host_cxx, std::string* version) {
  const std::string& cache_dir = options.cache_dir;
  const auto major = [&cache_dir](const std::string& clang, std::string* v) {
    *v = compiler_version(clang, cache_dir);
    std::smatch m;
    return std::regex_search(*v, m, std::regex(R"(clang version (\d+))")) ? std::stoi(m[1].str()) : 0;
  };
  std::string wanted = options.cuda_clang;
  if (const char* env = std::getenv("CRL_CUDA_CLANG"); wanted.empty() && env != nullptr) wanted = env;
  if (wanted == "none") return "";
  if (!wanted.empty() && wanted != "auto") {
    const std::string found = find_on_path(wanted);
    if (found.empty() || major(found, version) < 19) {
      throw InputError(fmt::format("'{}' (CRL_CUDA_CLANG or cuda_clang) is not a clang++ of version 19 or later on PATH "
                                   "(\"none\": nvcc only)", wanted));
    }
    return found;
  }
  std::vector<std::string> candidates;
  for (int n = 24; n >= 19; --n) candidates.push_back(find_on_path(fmt::format("clang++-{}", n)));
  candidates.push_back(host_cxx);
  for (const auto& clang : candidates) {
    if (!clang.empty() && major(clang, version) >= 19) return clang;
  }
  version->clear();
  return "";
}

// The CUDA toolkit's major version from its cuda.h (CUDA_VERSION 13000 -> 13); 0 when unreadable.
static int cuda_major_version(const std::string& cuda_home) {
  std::ifstream in(cuda_home + "/include/cuda.h");
  const std::regex define(R"(^#define CUDA_VERSION (\d+))");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, define)) return std::stoi(m[1].str()) / 1000;
  }
  return 0;
}

Compiler::Compiler(CompilerOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.options = std::move(options);
  if (d.options.cache_dir.empty()) d.options.cache_dir = default_compile_cache_dir();
  if (d.options.jobs == 0) d.options.jobs = std::max(1u, std::thread::hardware_concurrency());
  if (!d.options.cuda_arch.empty()) validate_cuda_arch(d.options.cuda_arch);
  d.toolchain = default_toolchain();
  if (!d.options.cxx.empty()) d.toolchain.cxx = find_on_path(d.options.cxx);
  if (!d.options.nvcc.empty()) d.toolchain.nvcc = find_on_path(d.options.nvcc);
  if (!d.options.torch_include_dir.empty()) d.toolchain.torch_include_dir = d.options.torch_include_dir;
  if (!d.options.torch_library_dir.empty()) d.toolchain.torch_library_dir = d.options.torch_library_dir;
  if (!d.options.cuda_home.empty()) d.toolchain.cuda_home = d.options.cuda_home;
  if (d.toolchain.cxx.empty()) {
    throw Error(fmt::format("no C++ compiler found (looked for '{}' and g++ on PATH)",
                            d.options.cxx.empty() ? "g++" : d.options.cxx));
  }
  d.cache = std::make_unique<CompileCache>(d.options.cache_dir);
  d.cache->remove_stale_build_dirs(std::chrono::hours(6));
  d.use_gold = gold_links_cxx(d.toolchain.cxx, d.options.cache_dir);
  d.cxx_version = compiler_version(d.toolchain.cxx, d.options.cache_dir);
  d.toolchain.host_cxx = choose_host_cxx(d.options, d.toolchain.cxx);
  d.host_cxx_version = compiler_version(d.toolchain.host_cxx, d.options.cache_dir);
  d.host_is_clang = d.host_cxx_version.find("clang") != std::string::npos;  // "c++" may be either
  if (!d.toolchain.nvcc.empty()) d.nvcc_version = compiler_version(d.toolchain.nvcc, d.options.cache_dir);
  if (!d.toolchain.nvcc.empty() && !d.toolchain.cuda_home.empty()) {
    d.cuda_clang = choose_cuda_clang(d.options, d.host_is_clang ? d.toolchain.host_cxx : "", &d.cuda_clang_version);
    d.cuda_major = cuda_major_version(d.toolchain.cuda_home);
  }
  d.node_slots = std::make_unique<NodeSlots>(
      d.options.node_slots_dir.empty() ? default_node_slots_dir() : d.options.node_slots_dir,
      d.options.node_slots > 0 ? d.options.node_slots : default_node_compile_slots());
  d.pool = std::make_unique<ThreadPool>(d.options.jobs);
}

Compiler::~Compiler() = default;

CompileResult Compiler::compile(const CompileRequest& request) { return impl_->compile(request); }

std::string Compiler::key_of(const CompileRequest& request) { return impl_->key_of(request); }

const CompilerOptions& Compiler::options() const { return impl_->options; }

const std::string& Compiler::host_cxx() const { return impl_->toolchain.host_cxx; }

const std::string& Compiler::cuda_clang() const { return impl_->cuda_clang; }

CompileResult Compiler::compile_extension(const ExtensionRequest& request) { return impl_->compile_extension(request); }

void Compiler::prepare(Backend backend) {
  if (backend == Backend::cuda) impl_->require_nvcc();
  impl_->ensure_pch(backend);
}


std::future<CompileResult> Compiler::submit(CompileRequest request) {
  Impl& d = *impl_;
  std::promise<CompileResult> promise;
  std::future<CompileResult> future = promise.get_future();
  std::string key;
  try {
    key = d.key_of(request);
  } catch (...) {
    promise.set_exception(std::current_exception());
    return future;
  }
  {
    std::lock_guard lock(d.inflight_mutex);
    if (const auto it = d.inflight.find(key); it != d.inflight.end()) {
      it->second.push_back(std::move(promise));  // a duplicate of a compile in flight: share its result
      return future;
    }
    d.inflight[key].push_back(std::move(promise));
  }
  d.pool->post([&d, key, request = std::move(request)] {
    std::optional<CompileResult> result;
    std::exception_ptr error;
    try {
      result = d.compile(request);
    } catch (...) {
      error = std::current_exception();
    }
    std::vector<std::promise<CompileResult>> waiters;
    {
      std::lock_guard lock(d.inflight_mutex);
      waiters = std::move(d.inflight[key]);
      d.inflight.erase(key);
    }
    for (size_t i = 0; i < waiters.size(); ++i) {
      if (error) {
        waiters[i].set_exception(error);
      } else {
        CompileResult r = *result;
        if (i > 0) r.cache_hit = true;  // the duplicates did not compile
        waiters[i].set_value(std::move(r));
      }
    }
  });
  return future;
}

}  // namespace crl
