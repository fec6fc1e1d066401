// WriterLock: flock on a companion lock file. The lock file is never deleted: unlinking a lock
// file that another process may be about to lock would let two writers in.
#include "results/writer_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/process_env.h"

namespace crl::results {

WriterLock::WriterLock(const std::string& results_path) : lock_path_(results_path + ".lock") {
  fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io_error("cannot create the writer lock file", lock_path_);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      char holder[256] = {};
      const auto n = ::pread(fd_, holder, sizeof(holder) - 1, 0);
      ::close(fd_);
      fd_ = -1;
      throw IoError(fmt::format(
          "results file '{}' already has a writer ({}; lock '{}'): crl allows one writer per "
          "file, so give this job its own results path",
          results_path, n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "holder unknown",
          lock_path_));
    }
    if (err == ENOSYS || err == EOPNOTSUPP || err == ENOLCK || err == EINVAL) {
      spdlog::warn(
          "the file system of '{}' does not support flock ({}); results file '{}' is "
          "not guarded against a second writer",
          lock_path_, std::strerror(err), results_path);
      return;
    }
    ::close(fd_);
    fd_ = -1;
    errno = err;
    throw_io_error("cannot lock", lock_path_);
  }
  held_ = true;
  // Who holds it, for the message a second writer gets.
  const std::string holder = fmt::format("held by host {}, pid {}", hostname(), ::getpid());
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const auto written = ::pwrite(fd_, holder.data(), holder.size(), 0);
  }
}

WriterLock::WriterLock(WriterLock&& other) noexcept
    : lock_path_(std::move(other.lock_path_)),
      fd_(std::exchange(other.fd_, -1)),
      held_(std::exchange(other.held_, false)) {}

WriterLock& WriterLock::operator=(WriterLock&& other) noexcept {
  if (this != &other) {
    release();
    lock_path_ = std::move(other.lock_path_);
    fd_ = std::exchange(other.fd_, -1);
    held_ = std::exchange(other.held_, false);
  }
  return *this;
}

WriterLock::~WriterLock() { release(); }

void WriterLock::release() {
  if (fd_ >= 0) {
    if (held_ && ::ftruncate(fd_, 0) != 0) {
      // The holder note is only a hint; a stale one cannot block anybody.
    }
    ::close(fd_);  // closing the descriptor drops the flock
  }
  fd_ = -1;
  held_ = false;
}

}  // namespace crl::results
