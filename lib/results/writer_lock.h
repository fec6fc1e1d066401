// The one-writer-per-file guard: an exclusive flock on "<results file>.lock", held while a
// ResultsWriter is open. The kernel drops it when the process dies, so a crash leaves no stale
// lock.
#pragma once

#include <string>

namespace crl::results {

class WriterLock {
 public:
  // Throws InputError naming both paths, the holding process where the kernel says (/proc/locks)
  // and the holder's own note (host, pid) when another writer holds the lock. On file systems without flock (some Lustre mounts) it warns and
  // proceeds unguarded rather than stopping the job.
  explicit WriterLock(const std::string& results_path);
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;
  WriterLock(WriterLock&& other) noexcept;
  WriterLock& operator=(WriterLock&& other) noexcept;
  ~WriterLock();

  const std::string& lock_path() const { return lock_path_; }
  // False when the file system refused flock and the writer runs unguarded.
  bool held() const { return held_; }

 private:
  void release();

  std::string lock_path_;
  int fd_ = -1;
  bool held_ = false;
};

}  // namespace crl::results
