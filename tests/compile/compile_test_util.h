// Helpers shared by the compile tests: a test cache directory, unique program texts, requests.
#pragma once

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>

#include "compile/compiler.h"
#include "program/program_text.h"
#include "shared_test_cache.h"

namespace crl::testing {

// The tests' shared cache (shared_test_cache.h), so each precompiled prelude (tens of seconds to
// build, and CI starts from none) is made once for every test binary; programs get a unique comment
// so each test starts from a cache miss.
inline std::string test_cache_dir() { return shared_test_cache_dir(); }

inline std::string unique_tag() {
  static std::atomic<int> counter{0};
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return std::to_string(now) + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
}

inline CompileRequest request_for(const std::string& text, size_t num_args, Backend backend,
                                  const std::string& origin = "test.crl") {
  CompileRequest request;
  request.program = parse_program_text(text, origin);
  request.num_args = num_args;
  request.backend = backend;
  return request;
}

inline CompilerOptions test_options(size_t jobs = 2) {
  CompilerOptions options;
  options.cache_dir = test_cache_dir();
  options.jobs = jobs;
  return options;
}

}  // namespace crl::testing
