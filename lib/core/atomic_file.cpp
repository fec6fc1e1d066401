// Atomic file writes: a temporary file beside the target, renamed over it (see atomic_file.h).
#include "core/atomic_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include "core/error.h"

namespace crl {

AtomicFileWriter::AtomicFileWriter(std::filesystem::path path) : path_(std::move(path)) {
  static std::atomic<unsigned> counter{0};
  temp_path_ = path_;
  temp_path_ += fmt::format(".tmp-{}-{}", ::getpid(), counter++);
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io_error("cannot create", temp_path_.string());
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_path_.c_str());
  }
}

void AtomicFileWriter::write(const void* data, size_t size) {
  if (fd_ < 0) throw IoError(fmt::format("{}: write after commit", path_.string()));
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io_error("cannot write", temp_path_.string());
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
}

void AtomicFileWriter::commit(bool durable) {
  if (fd_ < 0) throw IoError(fmt::format("{}: committed twice", path_.string()));
  if (durable && ::fsync(fd_) != 0) throw_io_error("cannot flush", temp_path_.string());
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) {
    ::unlink(temp_path_.c_str());
    throw_io_error("cannot close", temp_path_.string());
  }
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const int saved = errno;
    ::unlink(temp_path_.c_str());
    errno = saved;
    throw_io_error("cannot rename the temporary file onto", path_.string());
  }
  if (!durable) return;
  // Make the rename itself durable; a failure here leaves a complete file, so it is not fatal.
  const std::filesystem::path dir = path_.has_parent_path() ? path_.parent_path() : ".";
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text, bool durable) {
  AtomicFileWriter writer(path);
  writer.write(text);
  writer.commit(durable);
}

}  // namespace crl
