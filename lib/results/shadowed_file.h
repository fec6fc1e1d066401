// ShadowedFile: a results file that changes only by atomic renames. The writer works on a copy
// beside it ("<file>.shadow"); commit() swaps the two, so that "<file>" names a whole, fsynced
// state at every instant, however the writer dies (docs/results-format.md, "Crash consistency").
//
// The commit, for a file that exists (X: "<file>", the last commit; Y: "<file>.shadow", X plus this
// step's writes):
//   1. fsync Y;
//   2. renameat2(RENAME_EXCHANGE): "<file>" is now Y, "<file>.shadow" X, in one atomic step
//      (where the file system lacks it: link X to "<file>.shadow.old", rename Y onto "<file>",
//      rename the old link onto "<file>.shadow": "<file>" still names X or Y at every instant);
//   3. fsync the folder;
//   4. X catches up: the byte ranges written since the last commit are copied from Y into X, X is
//      cut to Y's size, and the writer goes on in X.
// Step 4 costs what the step wrote, not the file's size. A writer that dies anywhere leaves
// "<file>" at its last commit and a stale "<file>.shadow", which the next writer overwrites.
// Readers open "<file>" only and never see a shadow.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace crl::results {

// How commit() replaces the file. automatic: exchange where the file system offers it (Linux
// local file systems, tmpfs), else the hard-link sequence (NFS, Lustre), else copying the whole
// file each commit (file systems without hard links). The others force one way (tests).
enum class CommitMethod { automatic, exchange, link, copy };

class ShadowedFile {
 public:
  // A new file: `path` must not exist (IoError EEXIST otherwise); the shadow starts empty and
  // `path` first appears at the first commit().
  static std::unique_ptr<ShadowedFile> create(const std::string& path, CommitMethod method, bool durable);
  // An existing file (checked by the caller): the shadow starts as a copy of it (once per open).
  static std::unique_ptr<ShadowedFile> open(const std::string& path, CommitMethod method, bool durable);

  ShadowedFile(const ShadowedFile&) = delete;
  ShadowedFile& operator=(const ShadowedFile&) = delete;
  // Closes both files and removes the shadow: whatever was written since the last commit is
  // dropped, and "<file>" stays as of that commit.
  ~ShadowedFile();

  const std::string& path() const { return path_; }
  const std::string& shadow_path() const { return shadow_path_; }
  // The shadow's descriptor: where HDF5 reads and writes (it changes at each commit).
  int fd() const { return shadow_fd_; }

  // Called by the HDF5 driver for every write and resize of the shadow.
  void wrote(std::uint64_t offset, std::uint64_t size);
  void resized() { dirty_ = true; }
  // Called by the driver when a write or resize of the shadow failed: its bytes are unknown, so
  // it is never committed (commit() and finish() throw from then on).
  void failed() { broken_ = true; }
  // HDF5 opens and closes its driver on the shadow; finish() needs it closed.
  void driver_opened() { ++driver_opens_; }
  void driver_closed() { --driver_opens_; }

  // Makes the shadow the file (steps 1 to 4 above). IoError naming the file when a step fails;
  // "<file>" then names the last commit or this one, whole, and every later commit() or finish()
  // throws (the shadow may lack bytes), so a failed flush never becomes the file.
  void commit();
  // The last commit, after HDF5 closed the file: "<file>" becomes the shadow, and no shadow is
  // left behind.
  void finish();

 private:
  ShadowedFile(const std::string& path, CommitMethod method, bool durable);
  void swap_in();
  void publish_first();
  bool exchange();
  bool link_sequence();
  void copy_over();
  void catch_up();
  void require_unbroken() const;

  std::string path_;
  std::string dir_;          // the folder of both files
  std::string name_;         // base names within it
  std::string shadow_name_;
  std::string old_name_;     // the link sequence's temporary name
  std::string shadow_path_;
  CommitMethod method_;
  bool durable_;
  int dir_fd_ = -1;
  int shadow_fd_ = -1;
  int committed_fd_ = -1;    // "<file>" as last committed (-1 before the first commit)
  bool dirty_ = true;        // anything written since the last commit (a new file: yes)
  bool finished_ = false;
  bool broken_ = false;      // a commit failed part-way: the shadow is not to be committed
  int driver_opens_ = 0;
  std::map<std::uint64_t, std::uint64_t> written_;  // start -> end of the ranges written since the last commit
};

}  // namespace crl::results
