// ShadowedFile: commits by exchanging a results file with its shadow (see shadowed_file.h).
#include "results/shadowed_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE (glibc 2.28+)
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace crl::results {
namespace {

// errno values by which a file system says it does not offer an operation (as opposed to its
// failing on these files).
bool unsupported(int err) { return err == EINVAL || err == ENOSYS || err == EOPNOTSUPP || err == ENOTSUP || err == EPERM; }

void copy_range(int in, int out, std::uint64_t offset, std::uint64_t length, const std::string& out_path) {
  // copy_file_range copies inside the kernel (or shares blocks); read/write where it cannot.
  std::uint64_t done = 0;
  while (done < length) {
    loff_t in_off = static_cast<loff_t>(offset + done), out_off = in_off;
    const ssize_t n = ::copy_file_range(in, &in_off, out, &out_off, length - done, 0);
    if (n > 0) {
      done += static_cast<std::uint64_t>(n);
      continue;
    }
    if (n == 0) break;  // the source ended early: nothing more to copy
    if (errno == EINTR) continue;
    if (errno != EXDEV && !unsupported(errno)) throw_io_error("cannot copy into", out_path);
    std::vector<char> buffer(std::size_t{1} << 20);
    while (done < length) {
      const auto chunk = std::min<std::uint64_t>(buffer.size(), length - done);
      const ssize_t got = ::pread(in, buffer.data(), chunk, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) throw_io_error("cannot read the results file to copy it into", out_path);
      if (got == 0) return;
      for (ssize_t put = 0; put < got;) {
        const ssize_t n2 = ::pwrite(out, buffer.data() + put, static_cast<std::size_t>(got - put),
                                    static_cast<off_t>(offset + done) + put);
        if (n2 < 0 && errno == EINTR) continue;
        if (n2 < 0) throw_io_error("cannot write", out_path);
        put += n2;
      }
      done += static_cast<std::uint64_t>(got);
    }
  }
}

std::uint64_t size_of(int fd, const std::string& path) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw_io_error("cannot stat", path);
  return static_cast<std::uint64_t>(info.st_size);
}

}  // namespace

ShadowedFile::ShadowedFile(const std::string& path, CommitMethod method, bool durable)
    : path_(path), method_(method), durable_(durable) {
  const std::filesystem::path p(path);
  dir_ = p.has_parent_path() ? p.parent_path().string() : ".";
  name_ = p.filename().string();
  if (name_.empty() || name_ == "." || name_ == "..") {
    throw InputError(fmt::format("results file '{}' names a folder, not a file", path));
  }
  shadow_name_ = name_ + ".shadow";
  old_name_ = name_ + ".shadow.old";
  shadow_path_ = (std::filesystem::path(dir_) / shadow_name_).string();
  dir_fd_ = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd_ < 0) throw_io_error("cannot open the folder of results file", path);
  // A writer that died leaves a shadow (maybe a second name of the file itself, mid-commit) and
  // perhaps the link sequence's old name: unlinked, never truncated, so the file keeps its bytes.
  for (const std::string& stale : {shadow_name_, old_name_}) {
    if (::unlinkat(dir_fd_, stale.c_str(), 0) != 0 && errno != ENOENT) {
      const int err = errno;
      ::close(dir_fd_);
      errno = err;
      throw_io_error("cannot remove the stale shadow", (std::filesystem::path(dir_) / stale).string());
    }
  }
}

std::unique_ptr<ShadowedFile> ShadowedFile::create(const std::string& path, CommitMethod method, bool durable) {
  std::unique_ptr<ShadowedFile> file(new ShadowedFile(path, method, durable));
  struct stat info {};
  if (::fstatat(file->dir_fd_, file->name_.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0) {
    errno = EEXIST;
    throw_io_error("cannot create results file", path);
  }
  file->shadow_fd_ =
      ::openat(file->dir_fd_, file->shadow_name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (file->shadow_fd_ < 0) throw_io_error("cannot create the shadow of results file", file->shadow_path_);
  return file;
}

std::unique_ptr<ShadowedFile> ShadowedFile::open(const std::string& path, CommitMethod method, bool durable) {
  // A results file reached through a symbolic link is committed where it lives: the exchange
  // must swap the file, not the link.
  struct stat link {};
  std::string real = path;
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    std::error_code ec;
    real = std::filesystem::canonical(path, ec).string();
    if (ec) throw IoError(fmt::format("cannot resolve results file '{}': {}", path, ec.message()), ec.value());
  }
  std::unique_ptr<ShadowedFile> file(new ShadowedFile(real, method, durable));
  // Read-write: after the first commit this inode is the shadow the writer goes on in.
  file->committed_fd_ = ::openat(file->dir_fd_, file->name_.c_str(), O_RDWR | O_CLOEXEC);
  if (file->committed_fd_ < 0) throw_io_error("cannot open results file for writing", path);
  struct stat info {};
  if (::fstat(file->committed_fd_, &info) != 0) throw_io_error("cannot stat", path);
  file->shadow_fd_ =
      ::openat(file->dir_fd_, file->shadow_name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, info.st_mode & 0777);
  if (file->shadow_fd_ < 0) throw_io_error("cannot create the shadow of results file", file->shadow_path_);
  const auto size = static_cast<std::uint64_t>(info.st_size);
  copy_range(file->committed_fd_, file->shadow_fd_, 0, size, file->shadow_path_);
  if (::ftruncate(file->shadow_fd_, static_cast<off_t>(size)) != 0) throw_io_error("cannot resize", file->shadow_path_);
  file->dirty_ = false;
  return file;
}

ShadowedFile::~ShadowedFile() {
  if (!finished_ && dir_fd_ >= 0) ::unlinkat(dir_fd_, shadow_name_.c_str(), 0);
  for (int fd : {shadow_fd_, committed_fd_, dir_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void ShadowedFile::wrote(std::uint64_t offset, std::uint64_t size) {
  if (size == 0) return;
  std::uint64_t start = offset, end = offset + size;
  // Merge with every range it touches, so the map stays a set of disjoint ranges.
  auto it = written_.upper_bound(start);
  if (it != written_.begin() && std::prev(it)->second >= start) --it;
  while (it != written_.end() && it->first <= end) {
    start = std::min(start, it->first);
    end = std::max(end, it->second);
    it = written_.erase(it);
  }
  written_.emplace(start, end);
}

void ShadowedFile::commit() {
  if (finished_) throw Error(fmt::format("results file '{}': commit after finish", path_));
  require_unbroken();
  if (!dirty_ && written_.empty()) return;  // nothing changed since the last commit
  // Until this commit is through, a failure (a full disk in the catch-up, say) may leave the shadow
  // short of bytes the file has: it must never be committed then.
  broken_ = true;
  if (durable_ && ::fsync(shadow_fd_) != 0) throw_io_error("cannot fsync", shadow_path_);
  if (committed_fd_ < 0) {
    publish_first();
  } else {
    swap_in();
  }
  written_.clear();
  dirty_ = false;
  broken_ = false;
}

void ShadowedFile::require_unbroken() const {
  if (broken_) {
    throw Error(fmt::format("results file '{}': an earlier flush failed part-way, so its shadow is not trusted; the "
                            "file holds the last flush that completed (reopen it to go on)",
                            path_));
  }
}

// The first commit of a new file: "<file>" must still not exist (H5F_ACC_EXCL's promise), so it
// gets the shadow as a second name (link fails rather than replace), and a new shadow is made.
void ShadowedFile::publish_first() {
  if (::linkat(dir_fd_, shadow_name_.c_str(), dir_fd_, name_.c_str(), 0) != 0) {
    if (errno == EEXIST || !unsupported(errno)) throw_io_error("cannot create results file", path_);
    struct stat info {};
    if (::fstatat(dir_fd_, name_.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0) {
      errno = EEXIST;
      throw_io_error("cannot create results file", path_);
    }
    // No hard links here: the writer lock keeps other crl writers out, so a rename is safe.
    if (::renameat(dir_fd_, shadow_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
      throw_io_error("cannot create results file", path_);
    }
  } else if (::unlinkat(dir_fd_, shadow_name_.c_str(), 0) != 0) {
    throw_io_error("cannot remove the shadow's second name", shadow_path_);
  }
  if (durable_ && ::fsync(dir_fd_) != 0) throw_io_error("cannot fsync the folder of", path_);
  committed_fd_ = shadow_fd_;
  shadow_fd_ = -1;
  shadow_fd_ = ::openat(dir_fd_, shadow_name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (shadow_fd_ < 0) throw_io_error("cannot create the shadow of results file", shadow_path_);
  const auto size = size_of(committed_fd_, path_);
  copy_range(committed_fd_, shadow_fd_, 0, size, shadow_path_);
  if (::ftruncate(shadow_fd_, static_cast<off_t>(size)) != 0) throw_io_error("cannot resize", shadow_path_);
}

bool ShadowedFile::exchange() {
  if (::renameat2(dir_fd_, shadow_name_.c_str(), dir_fd_, name_.c_str(), RENAME_EXCHANGE) == 0) return true;
  if (unsupported(errno)) return false;
  throw_io_error("cannot exchange the shadow with results file", path_);
}

bool ShadowedFile::link_sequence() {
  if (::linkat(dir_fd_, name_.c_str(), dir_fd_, old_name_.c_str(), 0) != 0) {
    if (unsupported(errno) || errno == EMLINK) return false;
    throw_io_error("cannot link results file", path_);
  }
  if (::renameat(dir_fd_, shadow_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
    throw_io_error("cannot rename the shadow onto results file", path_);
  }
  if (::renameat(dir_fd_, old_name_.c_str(), dir_fd_, shadow_name_.c_str()) != 0) {
    throw_io_error("cannot rename the previous results file onto its shadow", shadow_path_);
  }
  return true;
}

// Without exchange or hard links: the shadow replaces the file, and a new shadow is a whole copy.
void ShadowedFile::copy_over() {
  if (::renameat(dir_fd_, shadow_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
    throw_io_error("cannot rename the shadow onto results file", path_);
  }
  if (durable_ && ::fsync(dir_fd_) != 0) throw_io_error("cannot fsync the folder of", path_);
  ::close(committed_fd_);
  committed_fd_ = shadow_fd_;
  shadow_fd_ = ::openat(dir_fd_, shadow_name_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (shadow_fd_ < 0) throw_io_error("cannot create the shadow of results file", shadow_path_);
  const auto size = size_of(committed_fd_, path_);
  copy_range(committed_fd_, shadow_fd_, 0, size, shadow_path_);
  if (::ftruncate(shadow_fd_, static_cast<off_t>(size)) != 0) throw_io_error("cannot resize", shadow_path_);
}

void ShadowedFile::swap_in() {
  bool swapped = false;
  if (method_ == CommitMethod::automatic || method_ == CommitMethod::exchange) {
    swapped = exchange();
    if (swapped) {
      method_ = CommitMethod::exchange;
    } else if (method_ == CommitMethod::exchange) {
      throw_io_error("cannot exchange the shadow with results file", path_);
    }
  }
  if (!swapped && (method_ == CommitMethod::automatic || method_ == CommitMethod::link)) {
    swapped = link_sequence();
    if (swapped) {
      method_ = CommitMethod::link;
    } else if (method_ == CommitMethod::link) {
      throw_io_error("cannot link results file", path_);
    } else {
      spdlog::warn("the file system of '{}' offers neither renameat2(RENAME_EXCHANGE) nor hard links: each flush "
                   "copies the whole results file",
                   path_);
      method_ = CommitMethod::copy;
    }
  }
  if (!swapped) {
    copy_over();
    return;
  }
  // The exchange must be on disk before the old file (now the shadow) is overwritten: a power
  // cut in between could otherwise bring back the old name over changed bytes.
  if (durable_ && ::fsync(dir_fd_) != 0) throw_io_error("cannot fsync the folder of", path_);
  std::swap(shadow_fd_, committed_fd_);
  catch_up();
}

void ShadowedFile::catch_up() {
  const auto size = size_of(committed_fd_, path_);
  for (const auto& [start, end] : written_) {
    if (start >= size) continue;
    copy_range(committed_fd_, shadow_fd_, start, std::min(end, size) - start, shadow_path_);
  }
  if (::ftruncate(shadow_fd_, static_cast<off_t>(size)) != 0) throw_io_error("cannot resize", shadow_path_);
}

void ShadowedFile::finish() {
  if (finished_) return;
  require_unbroken();
  if (driver_opens_ != 0) {
    throw Error(fmt::format("results file '{}': HDF5 still holds the file (an object left open?)", path_));
  }
  if (committed_fd_ < 0 || dirty_ || !written_.empty()) {
    if (durable_ && ::fsync(shadow_fd_) != 0) throw_io_error("cannot fsync", shadow_path_);
    if (committed_fd_ < 0) {
      publish_first();  // leaves a new shadow, removed below
    } else {
      if (::renameat(dir_fd_, shadow_name_.c_str(), dir_fd_, name_.c_str()) != 0) {
        throw_io_error("cannot rename the shadow onto results file", path_);
      }
      if (durable_ && ::fsync(dir_fd_) != 0) throw_io_error("cannot fsync the folder of", path_);
      finished_ = true;
      return;
    }
  }
  if (::unlinkat(dir_fd_, shadow_name_.c_str(), 0) != 0 && errno != ENOENT) {
    throw_io_error("cannot remove the shadow", shadow_path_);
  }
  finished_ = true;
}

}  // namespace crl::results
