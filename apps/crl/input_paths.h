// CLI11 checks for paths a user gives on the command line: one that is missing or of the wrong kind
// is bad input (crl's exit 3, through decide_exit), not a usage error (2) as CLI11's own
// ExistingFile and ExistingDirectory make it.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace crl::cli {

enum class PathKind { file, directory };

// Throws crl::InputError "<option> '<path>': does not exist" / "is a folder, not a file" / "is a
// file, not a folder"; CLI11 lets it through to main().
CLI::Validator existing_input(PathKind kind, const std::string& option);

}  // namespace crl::cli
