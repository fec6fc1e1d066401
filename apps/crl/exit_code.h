// The one place that decides crl's exit code for an error that ends a command: bad input (3) or
// crl's own fault (4). main() and `crl run`'s ranks (which must MPI_Abort with it) both use it.
#pragma once

#include <exception>
#include <string>

namespace crl::cli {

struct ExitDecision {
  int code;             // kExitInputError or kExitInternal
  std::string message;  // what to log: the error's own words (naming the file), prefixed for crl's faults
};

// InputError: 3. An OS error on a path (IoError or std::filesystem::filesystem_error whose errno
// says the path is missing, of the wrong kind, looping or not permitted: is_path_error): 3, since a
// path a user gave (or one a job file names) is wrong. Anything else: 4, crl's own fault or the
// machine's (a full disk, an I/O error, an API failure, a bug).
ExitDecision decide_exit(const std::exception& error);

}  // namespace crl::cli
