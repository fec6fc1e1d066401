// WriterLock: flock on a companion lock file. The lock file is never deleted: unlinking a lock
// file that another process may be about to lock would let two writers in.
#include "results/writer_lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/process_env.h"

namespace crl::results {
namespace {

// The process holding a flock on `fd`'s file, as the kernel lists it in /proc/locks ("1: FLOCK
// ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF"), with its name from /proc/<pid>/comm:
// "process 1234 (crl)". Empty where the kernel does not say (another node over NFS, a process in
// another pid namespace).
std::string lock_holder_from_kernel(int fd) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) return "";
  std::ifstream locks("/proc/locks");
  const std::string exact = fmt::format("{:02x}:{:02x}:{}", major(info.st_dev), minor(info.st_dev), info.st_ino);
  const std::string inode = fmt::format(":{}", info.st_ino);
  std::string line, by_inode;
  while (std::getline(locks, line)) {
    std::istringstream fields(line);
    std::string number, type, mode, access, pid, file;
    if (!(fields >> number >> type >> mode >> access >> pid >> file) || type != "FLOCK" || pid == "-1") continue;
    // The device as the kernel numbers it can differ from stat's (overlay, btrfs): the inode alone
    // is the fallback.
    if (file == exact) {
      by_inode = pid;
      break;
    }
    if (file.size() > inode.size() && file.compare(file.size() - inode.size(), inode.size(), inode) == 0) by_inode = pid;
  }
  if (by_inode.empty() || by_inode.find_first_not_of("0123456789") != std::string::npos) return "";
  std::string name;
  std::ifstream comm(fmt::format("/proc/{}/comm", by_inode));
  std::getline(comm, name);
  return name.empty() ? fmt::format("process {}", by_inode) : fmt::format("process {} ({})", by_inode, name);
}

}  // namespace

WriterLock::WriterLock(const std::string& results_path) : lock_path_(results_path + ".lock") {
  fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io_error("cannot create the writer lock file", lock_path_);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EWOULDBLOCK) {
      char note[256] = {};
      const auto n = ::pread(fd_, note, sizeof(note) - 1, 0);
      const std::string kernel = lock_holder_from_kernel(fd_);
      ::close(fd_);
      fd_ = -1;
      // The user's to resolve (two jobs given one results path): bad input, exit 3.
      throw InputError(fmt::format(
          "results file '{}' already has a writer: {}{} (lock '{}'); crl allows one writer per file: "
          "stop that writer or give this job its own results path",
          results_path, kernel.empty() ? "" : fmt::format("{} holds it (/proc/locks); ", kernel),
          n > 0 ? std::string(note, static_cast<std::size_t>(n)) : "the lock file names no holder", lock_path_));
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
