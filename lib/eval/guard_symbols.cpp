// Dynamic-symbol guard (see guard_symbols.h).
#include "eval/guard_symbols.h"

#include <regex>
#include <sstream>

#include "core/error.h"
#include "core/subprocess.h"

namespace crl::eval {
namespace {

struct Rule {
  std::regex pattern;
  std::string why;
};

const std::vector<Rule>& defined_rules() {
  static const std::vector<Rule> rules = {
      {std::regex("^(cuda|cu)[A-Z].*"), "CUDA runtime/driver API name (timing and synchronisation)"},
      {std::regex("^(clock_gettime|clock_getres|gettimeofday|time|clock|times|timespec_get|omp_get_wtime)$"), "timing"},
      {std::regex("^_ZNSt6chrono3_V2[0-9]+(steady|system|high_resolution)_clock3nowEv$"), "timing (std::chrono)"},
      {std::regex("^(nanosleep|usleep|sleep|sched_yield)$"), "sleeping"},
      {std::regex("^(malloc|free|calloc|realloc|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|mmap|munmap|"
                  "_Znwm|_Znam|_ZdlPv|_ZdaPv|_ZdlPvm|_ZdaPvm)$"),
       "allocation"},
      {std::regex("^(dlsym|dlvsym|dlopen|dlclose|dladdr)$"), "loader"},
      {std::regex("^(pthread_create|pthread_join|pthread_detach|pthread_mutex_lock|pthread_cond_wait)$"), "threads"},
      {std::regex("^(nccl|MPI_).*"), "communication library name"},
  };
  return rules;
}

const std::vector<Rule>& undefined_rules() {
  static const std::vector<Rule> rules = {
      {std::regex("^(dlsym|dlvsym|dlopen|dlmopen|_dl_sym)(@.*)?$"), "loader (could find and patch timing functions)"},
      {std::regex("^(mprotect|pkey_mprotect|ptrace|process_vm_writev)(@.*)?$"), "memory protection / tracing"},
  };
  return rules;
}

}  // namespace

std::vector<SymbolFinding> judge_symbols(const std::vector<std::string>& defined, const std::vector<std::string>& undefined) {
  std::vector<SymbolFinding> findings;
  for (const auto& name : defined) {
    for (const auto& rule : defined_rules()) {
      if (std::regex_match(name, rule.pattern)) {
        findings.push_back({name, true, rule.why});
        break;
      }
    }
  }
  for (const auto& name : undefined) {
    for (const auto& rule : undefined_rules()) {
      if (std::regex_match(name, rule.pattern)) {
        findings.push_back({name, false, rule.why});
        break;
      }
    }
  }
  return findings;
}

std::vector<SymbolFinding> scan_symbols(const std::vector<std::string>& paths) {
  std::vector<std::string> defined;
  std::vector<std::string> undefined;
  for (const auto& path : paths) {
    // The whole symbol table, not only the dynamic one: programs are built with hidden visibility,
    // so a definition that cannot interpose today still shows intent (and one attribute would
    // export it). The dynamic table is the fallback for a stripped library.
    CommandResult result = run_command({"nm", path});
    if (result.ok() && result.output.find("no symbols") != std::string::npos) result = run_command({"nm", "-D", path});
    if (!result.ok()) throw Error("nm " + path + " failed: " + result.output);
    std::istringstream lines(result.output);
    std::string line;
    while (std::getline(lines, line)) {
      // "<address> <type> <name>" or "                 U <name>" (weak undefined: w or v).
      std::istringstream fields(line);
      std::vector<std::string> parts;
      for (std::string f; fields >> f;) parts.push_back(f);
      if (parts.size() < 2) continue;
      const std::string& type = parts[parts.size() - 2];
      std::string name = parts.back();
      if (const auto at = name.find('@'); at != std::string::npos) name.resize(at);
      if (type == "U" || type == "w" || type == "v") {
        undefined.push_back(name);
      } else if (type == "T" || type == "t" || type == "W" || type == "i") {  // functions only
        defined.push_back(name);
      }
    }
  }
  return judge_symbols(defined, undefined);
}

std::string describe(const std::vector<SymbolFinding>& findings) {
  std::string out;
  for (const auto& f : findings) {
    if (!out.empty()) out += "; ";
    out += (f.defined ? "defines " : "imports ") + f.symbol + " (" + f.why + ")";
  }
  return out;
}

}  // namespace crl::eval
