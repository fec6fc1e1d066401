// Where a result came from (see provenance.h).
#include "core/provenance.h"

#include <chrono>

#include "core/error.h"
#include "core/subprocess.h"

namespace crl {

std::string git_commit() {
  try {
    const CommandResult r = run_command({"git", "-C", CRL_SOURCE_DIR, "rev-parse", "HEAD"}, {.timeout = std::chrono::seconds(10)});
    if (r.ok()) return r.output.substr(0, r.output.find_first_of("\r\n"));
  } catch (const Error&) {
  }
  return "unknown";
}

}  // namespace crl
