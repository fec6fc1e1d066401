// The per-node compile cache: one immutable directory per key (the .so and result.json), published
// by an atomic rename, so concurrent writers in any process never expose a half-written entry.
//
// Layout under the cache root:   objects/<k0k1>/<key>/{program.so, result.json}
//                                pch/<key>/{crl_prelude.h, crl_prelude.h.gch}
//                                locks/<first 3 hex digits of key>.lock (bounded: 4096 files)
//                                tmp/    toolchains/
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "compile/compiler.h"

namespace crl {

// An exclusive flock on a file, held for the object's lifetime (serialises processes and threads).
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

class CompileCache {
 public:
  // Creates the directories (IoError if it cannot).
  explicit CompileCache(std::string root);

  const std::string& root() const { return root_; }
  std::string entry_dir(const std::string& key) const;
  std::string lock_path(const std::string& key) const;
  std::string pch_dir(const std::string& pch_key) const;

  // The cached result for `key` (the log's origin rewritten to `origin`), or nullopt. A damaged
  // entry (unreadable result.json, ok without its library) counts as a miss.
  std::optional<CompileResult> lookup(const std::string& key, const std::string& origin) const;

  // Removes build directories under tmp/ older than `age` (left by processes that died mid-compile).
  void remove_stale_build_dirs(std::chrono::seconds age) const;
  // Removes the least recently used entries (a hit refreshes an entry's result.json mtime) until
  // the objects take at most `max_bytes`, sparing entries used within `min_age` (another process
  // may be about to load them). Returns the number removed. A library already loaded stays usable.
  size_t prune(uint64_t max_bytes, std::chrono::seconds min_age = std::chrono::hours(1)) const;
  // A fresh private directory under tmp/ for building an entry.
  std::string make_build_dir() const;
  // Writes result.json into `build_dir` (which holds program.so when result.ok) and renames it to
  // the entry's place. If another writer got there first, `build_dir` is discarded and theirs is
  // returned. Returns the stored result with library_path set.
  CompileResult publish(const std::string& build_dir, const std::string& key, const std::string& origin,
                        CompileResult result) const;

 private:
  std::string root_;
};

// rm -rf `path`, best effort. (Not std::filesystem::remove_all: libtorch.so exports its own copy
// of the std::filesystem symbols, and in a process that links it remove_all crashes.)
void remove_tree(const std::string& path);

}  // namespace crl
