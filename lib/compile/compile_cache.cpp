// Content-addressed cache directories with atomic publication and flock-based locks.
#include "compile/compile_cache.h"

#include <fcntl.h>
#include <ftw.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"

namespace crl {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLibraryName = "program.so";
constexpr const char* kResultName = "result.json";

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty() || from == to) return text;
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size())) {
    text.replace(pos, from.size(), to);
  }
  return text;
}

// The program's own objects, kept beside its library for the symbol guard.
std::vector<std::string> object_paths_in(const std::string& dir) {
  std::vector<std::string> paths;
  for (const char* name : {"host.o", "device.o"}) {
    const std::string path = dir + "/" + name;
    if (access(path.c_str(), R_OK) == 0) paths.push_back(path);
  }
  return paths;
}

}  // namespace

FileLock::FileLock(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io_error("cannot open lock file", path);
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    errno = err;
    throw_io_error("cannot lock", path);
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

void remove_tree(const std::string& path) {
  const auto remove_one = [](const char* file, const struct stat*, int, struct FTW*) {
    ::remove(file);
    return 0;
  };
  ::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

CompileCache::CompileCache(std::string root) : root_(std::move(root)) {
  for (const char* sub : {"objects", "pch", "locks", "tmp", "toolchains"}) {
    std::error_code ec;
    fs::create_directories(fs::path(root_) / sub, ec);
    if (ec) throw IoError(fmt::format("cannot create compile cache directory '{}': {}", (fs::path(root_) / sub).string(), ec.message()));
  }
}

std::string CompileCache::entry_dir(const std::string& key) const {
  return (fs::path(root_) / "objects" / key.substr(0, 2) / key).string();
}

// Striped: two keys that share a stripe merely compile one after the other, and the number of
// lock files stays bounded (a lock file cannot be deleted safely while others may open it).
std::string CompileCache::lock_path(const std::string& key) const {
  return (fs::path(root_) / "locks" / (key.substr(0, 3) + ".lock")).string();
}

void CompileCache::remove_stale_build_dirs(std::chrono::seconds age) const {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& entry : fs::directory_iterator(fs::path(root_) / "tmp", ec)) {
    const auto written = entry.last_write_time(ec);
    if (!ec && now - written > age) remove_tree(entry.path().string());
  }
}

std::string CompileCache::pch_dir(const std::string& pch_key) const {
  return (fs::path(root_) / "pch" / pch_key).string();
}

std::optional<CompileResult> CompileCache::lookup(const std::string& key, const std::string& origin) const {
  const std::string dir = entry_dir(key);
  std::ifstream in(dir + "/" + kResultName);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const auto json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) return std::nullopt;
  CompileResult result;
  try {
    result.ok = json.at("ok").get<bool>();
    result.log = replace_all(json.at("log").get<std::string>(), json.at("origin").get<std::string>(), origin);
    result.stage = json.at("stage").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  result.key = key;
  result.cache_hit = true;
  if (result.ok) {
    result.library_path = dir + "/" + kLibraryName;
    if (access(result.library_path.c_str(), R_OK) != 0) return std::nullopt;
    result.object_paths = object_paths_in(dir);
  }
  // Mark the entry used, for prune() (best effort: a read-only cache still serves hits).
  ::utimensat(AT_FDCWD, (dir + "/" + kResultName).c_str(), nullptr, 0);
  return result;
}

size_t CompileCache::prune(uint64_t max_bytes, std::chrono::seconds min_age) const {
  struct Entry {
    fs::file_time_type used;
    uint64_t bytes;
    std::string dir;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& shard : fs::directory_iterator(fs::path(root_) / "objects", ec)) {
    for (const auto& entry : fs::directory_iterator(shard.path(), ec)) {
      Entry e{fs::last_write_time(entry.path() / kResultName, ec), 0, entry.path().string()};
      if (ec) continue;  // no result.json: not a published entry
      for (const auto& file : fs::directory_iterator(entry.path(), ec)) e.bytes += file.file_size(ec);
      total += e.bytes;
      entries.push_back(std::move(e));
    }
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  const auto now = fs::file_time_type::clock::now();
  size_t removed = 0;
  for (const Entry& e : entries) {
    if (total <= max_bytes || now - e.used < min_age) break;
    remove_tree(e.dir);
    total -= e.bytes;
    ++removed;
  }
  return removed;
}

std::string CompileCache::make_build_dir() const {
  std::string pattern = (fs::path(root_) / "tmp" / "build-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) throw_io_error("cannot create a build directory in", root_ + "/tmp");
  return pattern;
}

CompileResult CompileCache::publish(const std::string& build_dir, const std::string& key, const std::string& origin,
                                    CompileResult result) const {
  const nlohmann::json json = {{"ok", result.ok},       {"log", result.log},       {"stage", result.stage},
                               {"origin", origin},      {"key", key},              {"compile_seconds", result.seconds}};
  write_file_atomically(build_dir + "/" + kResultName, json.dump(1), /*durable=*/false);
  const std::string dir = entry_dir(key);
  std::error_code ec;
  fs::create_directories(fs::path(dir).parent_path(), ec);
  if (std::rename(build_dir.c_str(), dir.c_str()) != 0) {
    const int err = errno;
    if (err != EEXIST && err != ENOTEMPTY) {
      remove_tree(build_dir);
      errno = err;
      throw_io_error("cannot publish compile cache entry", dir);
    }
    // Someone published this key first: theirs is identical in content, keep it.
    remove_tree(build_dir);
  }
  result.key = key;
  result.library_path = result.ok ? dir + "/" + kLibraryName : "";
  result.object_paths = result.ok ? object_paths_in(dir) : std::vector<std::string>{};
  return result;
}

}  // namespace crl
