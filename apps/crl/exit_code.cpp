// decide_exit: error -> exit code, for every subcommand (see exit_code.h).
#include "apps/crl/exit_code.h"

#include <fmt/format.h>

#include <filesystem>

#include "apps/crl/commands.h"
#include "core/error.h"

namespace crl::cli {

ExitDecision decide_exit(const std::exception& error) {
  if (dynamic_cast<const InputError*>(&error) != nullptr) return {kExitInputError, error.what()};
  if (const auto* io = dynamic_cast<const IoError*>(&error); io != nullptr && is_path_error(io->error_number())) {
    return {kExitInputError, error.what()};
  }
  if (const auto* fs = dynamic_cast<const std::filesystem::filesystem_error*>(&error); fs != nullptr) {
    // "filesystem error: cannot create directories: Not a directory [runs/x]": it names the path.
    if (fs->code().category() == std::generic_category() || fs->code().category() == std::system_category()) {
      if (is_path_error(fs->code().value())) return {kExitInputError, error.what()};
    }
    return {kExitInternal, error.what()};
  }
  if (dynamic_cast<const Error*>(&error) != nullptr) return {kExitInternal, error.what()};
  return {kExitInternal, fmt::format("unexpected error: {}", error.what())};
}

}  // namespace crl::cli
