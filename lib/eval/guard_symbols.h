// Timer-tampering guard: a candidate library must not define (and so possibly interpose) timing,
// synchronisation, allocation or loader symbols, nor call the loader or memory-protection
// functions it could use to patch them at run time. Reads the .so's symbol table (nm).
#pragma once

#include <string>
#include <vector>

namespace crl::eval {

struct SymbolFinding {
  std::string symbol;
  bool defined = false;  // true: the library defines it; false: it references it
  std::string why;
};

// Judges symbol names: `defined` are the library's defined dynamic symbols, `undefined` the ones
// it imports. Pure, for tests.
std::vector<SymbolFinding> judge_symbols(const std::vector<std::string>& defined, const std::vector<std::string>& undefined);

// Runs `nm` on the library (its functions, local ones included) and judges its symbols. Throws Error when nm cannot read it.
std::vector<SymbolFinding> scan_library_symbols(const std::string& library_path);

// "defines clock_gettime (timing); imports dlsym (loader)"
std::string describe(const std::vector<SymbolFinding>& findings);

}  // namespace crl::eval
