// The per-node compile cache: one immutable directory per key (the .so and result.json), published
// by an atomic rename, so concurrent writers in any process never expose a half-written entry.
//
// Layout under the cache root:   objects/<k0k1>/<key>/{program.so, result.json}
//                                pch/<key>/{crl_prelude.h, crl_prelude.h.gch}
//                                locks/<first 3 hex digits of key>.lock (bounded: 4096 files)
//                                timeouts/<key>.json (compiles that ran out of time, and the limit)
//                                tmp/    toolchains/
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "compile/compiler.h"
#include "core/remove_tree.h"  // remove_tree, which the compiler uses too

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
  // Creates the directories (IoError if it cannot). The cache keeps itself within `max_bytes` of
  // objects: it prunes (least recently used first) when opened and after every 32 publishes.
  explicit CompileCache(std::string root, uint64_t max_bytes = default_max_bytes());

  // $CRL_CACHE_MAX_BYTES when set (bytes, or with a K/M/G suffix), else 20 GiB.
  static uint64_t default_max_bytes();

  const std::string& root() const { return root_; }
  // objects/: every entry's folder, and nothing else of the cache (its locks, the precompiled
  // prelude and the builds in progress lie outside it).
  std::string objects_dir() const;
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
  // A compile that timed out under a limit of `limit_seconds` says nothing about the program but
  // that it needs longer: remembered (timeouts/<key>.json, the largest such limit), so the same
  // program is not compiled again under the same or a shorter limit; a longer one tries again.
  void remember_timeout(const std::string& key, const std::string& origin, double limit_seconds,
                        const CompileResult& result) const;
  // The remembered timed-out result (its log saying so), when `key` timed out under a limit of at
  // least `limit_seconds`; else nullopt.
  std::optional<CompileResult> lookup_timeout(const std::string& key, const std::string& origin,
                                              double limit_seconds) const;
  // Writes result.json into `build_dir` (which holds program.so when result.ok) and renames it to
  // the entry's place. If another writer got there first, `build_dir` is discarded and theirs is
  // returned. Returns the stored result with library_path set.
  CompileResult publish(const std::string& build_dir, const std::string& key, const std::string& origin,
                        CompileResult result) const;

 private:
  std::string root_;
  uint64_t max_bytes_;
  mutable std::atomic<uint64_t> publishes_{0};
};

}  // namespace crl
