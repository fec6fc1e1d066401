// Regex scan of program text (see static_scan.h).
#include "eval/static_scan.h"

#include <regex>
#include <sstream>

namespace crl::eval {
namespace {

struct Pattern {
  std::regex re;
  std::string construct;
};

const std::vector<Pattern>& patterns() {
  static const std::vector<Pattern> list = {
      {std::regex(R"(cudaStreamCreate|cudaStreamNonBlocking|getStreamFromPool|cudaStreamPerThread|cudaStreamLegacy)"), "other CUDA stream"},
      {std::regex(R"(cudaEvent(Create|Record)|cudaLaunchHostFunc|cudaStreamAddCallback|cudaGraph)"), "events, host callbacks or graphs"},
      {std::regex(R"(std::(thread|jthread|async)\b|pthread_create|\.detach\s*\()"), "host thread"},
      {std::regex(R"(^\s*static\b(?!\s+(inline\s+)?(constexpr|const\b|void|__global__|__device__|__forceinline__|inline)))"), "static state (a cache across calls?)"},
      {std::regex(R"(\basm\b|__asm__|\bvolatile\s*\()"), "inline assembly"},
      {std::regex(R"(\bdl(sym|open|vsym)\b|LD_PRELOAD|mprotect|ptrace)"), "loader or memory patching"},
      {std::regex(R"(#\s*include\s*[<"](sys/|dlfcn|link\.h|elf\.h|bits/|c10/cuda/CUDACachingAllocator|pthread))"), "system internals include"},
      {std::regex(R"(\b(getenv|setenv|putenv)\b)"), "environment"},
      {std::regex(R"(\b(fopen|open|ifstream|ofstream|popen|system|fork|exec[lv]p?e?)\s*\()"), "files or processes"},
      {std::regex(R"(clock_gettime|gettimeofday|std::chrono|cudaEventElapsedTime)"), "timing"},
      {std::regex(R"(from_blob|set_data|unsafeGetTensorImpl|storage\(\)\.set_)"), "raw memory behind a tensor"},
      {std::regex(R"(emptyCache|CUDACachingAllocator|cudaMalloc(Async)?\b|malloc\s*\()"), "allocator"},
  };
  return list;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

std::vector<ScanFinding> static_scan(const std::string& program_text) {
  std::vector<ScanFinding> findings;
  std::istringstream lines(program_text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    const std::string t = trim(line);
    if (t.rfind("//", 0) == 0) continue;  // comments say what they like
    for (const auto& p : patterns()) {
      if (std::regex_search(line, p.re)) findings.push_back({number, p.construct, t.substr(0, 120)});
    }
  }
  return findings;
}

std::string describe(const std::vector<ScanFinding>& findings) {
  if (findings.empty()) return "nothing suspicious";
  std::string out;
  for (const auto& f : findings) {
    if (!out.empty()) out += "; ";
    out += "line " + std::to_string(f.line) + ": " + f.construct + " (" + f.text + ")";
  }
  return out;
}

}  // namespace crl::eval
