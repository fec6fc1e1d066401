// Test helper: compiles one .crl file into a cache, prints "ok <cache_hit 0|1> <library>" or "failed".
// Usage: compile_helper <file.crl> <cache_dir> <cpu|cuda> <num_args>
#include <cstdio>
#include <exception>
#include <string>

#include "compile/compiler.h"
#include "program/program_text.h"

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: compile_helper <file.crl> <cache_dir> <cpu|cuda> <num_args>\n");
    return 2;
  }
  try {
    crl::CompilerOptions options;
    options.cache_dir = argv[2];
    options.jobs = 1;
    crl::Compiler compiler(options);
    crl::CompileRequest request;
    request.program = crl::load_program_file(argv[1]);
    request.backend = crl::parse_backend(argv[3]);
    request.num_args = std::stoul(argv[4]);
    const crl::CompileResult r = compiler.compile(request);
    if (!r.ok) {
      std::printf("failed\n%s\n", r.log.c_str());
      return 1;
    }
    std::printf("ok %d %s\n", r.cache_hit ? 1 : 0, r.library_path.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compile_helper: %s\n", e.what());
    return 4;
  }
}
