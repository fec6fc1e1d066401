// Timer-tampering guard: a candidate library must not define (and so possibly interpose) timing,
// synchronisation, allocation or loader symbols, nor call the loader or memory-protection
// functions it could use to patch them at run time. Reads the symbol tables (nm) of the program's
// own object files: the linked .so would also hold whatever the toolchain links in statically
// (g++ on the H200 links operator new/delete into it), which is not the candidate's doing.
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

// Runs `nm` on each file (an object or a library; its functions, local ones included) and judges
// their symbols together. Throws Error when nm cannot read one.
std::vector<SymbolFinding> scan_symbols(const std::vector<std::string>& paths);

// "defines clock_gettime (timing); imports dlsym (loader)"
std::string describe(const std::vector<SymbolFinding>& findings);

}  // namespace crl::eval
