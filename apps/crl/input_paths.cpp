// existing_input: CLI11 checks whose failures are crl::InputErrors (see input_paths.h).
#include "apps/crl/input_paths.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"

namespace crl::cli {

CLI::Validator existing_input(PathKind kind, const std::string& option) {
  return CLI::Validator(
      [kind, option](std::string& path) -> std::string {
        std::error_code ec;
        const auto status = std::filesystem::status(path, ec);
        if (ec && ec != std::errc::no_such_file_or_directory) {
          throw InputError(fmt::format("{} '{}': {}", option, path, ec.message()));
        }
        if (!std::filesystem::exists(status)) throw InputError(fmt::format("{} '{}': does not exist", option, path));
        if (kind == PathKind::file && std::filesystem::is_directory(status)) {
          throw InputError(fmt::format("{} '{}': is a folder, not a file", option, path));
        }
        if (kind == PathKind::directory && !std::filesystem::is_directory(status)) {
          throw InputError(fmt::format("{} '{}': is a file, not a folder", option, path));
        }
        return "";
      },
      kind == PathKind::file ? "FILE" : "DIR");
}

}  // namespace crl::cli
