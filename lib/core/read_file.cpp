// read_file: open, check it is a regular file within the size bound, read it in one go;
// read_input_file: the same for files the user named.
#include "core/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "core/error.h"

namespace crl {

std::string read_file(const std::filesystem::path& path, const std::string& what, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io_error(fmt::format("cannot open {}", what), path.string());
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw_io_error(fmt::format("cannot stat {}", what), path.string());
  if (!S_ISREG(info.st_mode)) throw InputError(fmt::format("{} '{}' is not a regular file", what, path.string()));
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size > max_bytes) {
    throw InputError(fmt::format("{} '{}' holds {} bytes, more than the {} crl reads", what, path.string(), size,
                                 max_bytes));
  }
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io_error(fmt::format("cannot read {}", what), path.string());
    if (n == 0) break;  // shrank while we read: return what is there
    done += static_cast<size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

std::string read_input_file(const std::filesystem::path& path, const std::string& what, uint64_t max_bytes) {
  try {
    return read_file(path, what, max_bytes);
  } catch (const IoError& e) {
    throw InputError(e.what());
  }
}

}  // namespace crl
