// Formatting of crl's typed errors: call, file, line, rank and host in one line.
#include "core/error.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/process_env.h"

namespace crl {

std::string process_location() {
  const auto place = launch_place();
  if (place.rank >= 0) {
    return fmt::format("host {}, rank {}", hostname(), place.rank);
  }
  return fmt::format("host {}", hostname());
}

void throw_api_error(const char* api, const char* call, const std::string& detail, const char* file,
                     int line) {
  throw ApiError(api, fmt::format("{} call failed: {}: {} ({}:{}, {})", api, call, detail, file,
                                  line, process_location()));
}

void throw_io_error(const std::string& what, const std::string& path) {
  const int err = errno;
  throw IoError(fmt::format("{} '{}': {}", what, path, std::strerror(err)), err);
}

bool is_path_error(int error_number) {
  switch (error_number) {
    case ENOENT:        // no such file or folder
    case ENOTDIR:       // a file where a folder belongs
    case EISDIR:        // a folder where a file belongs
    case ELOOP:         // symbolic links in a loop
    case ENAMETOOLONG:
    case EACCES:        // permissions
    case EPERM:
    case EROFS:         // an output path on a read-only file system
    case EEXIST:        // an output path that is taken
    case ENOTEMPTY:
    case ENXIO:         // a device or socket where a file belongs
    case ETXTBSY:
      return true;
    default:
      return false;
  }
}

}  // namespace crl
