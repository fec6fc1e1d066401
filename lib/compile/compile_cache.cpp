// Content-addressed cache directories with atomic publication and flock-based locks.
#include "compile/compile_cache.h"

#include <fcntl.h>
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
#include "core/read_file.h"

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

CompileCache::CompileCache(std::string root, uint64_t max_bytes) : root_(std::move(root)), max_bytes_(max_bytes) {
  for (const char* sub : {"objects", "pch", "locks", "tmp", "toolchains", "timeouts"}) {
    std::error_code ec;
    fs::create_directories(fs::path(root_) / sub, ec);
    if (ec) throw IoError(fmt::format("cannot create compile cache directory '{}': {}", (fs::path(root_) / sub).string(), ec.message()), ec.value());
  }
  prune(max_bytes_);
}

uint64_t CompileCache::default_max_bytes() {
  constexpr uint64_t kDefault = uint64_t{20} << 30;
  const char* text = std::getenv("CRL_CACHE_MAX_BYTES");
  if (text == nullptr || *text == '\0') return kDefault;
  char* end = nullptr;
  const double value = std::strtod(text, &end);
  const std::string suffix = end;
  const double scale = suffix.empty() ? 1 : suffix == "K" ? 0x1p10 : suffix == "M" ? 0x1p20 : suffix == "G" ? 0x1p30 : -1;
  if (!(value > 0) || scale < 0 || !(value * scale < 0x1p63)) {
    throw InputError(fmt::format("CRL_CACHE_MAX_BYTES='{}': expected a positive size in bytes, or with K, M or G", text));
  }
  return static_cast<uint64_t>(value * scale);
}

namespace {

std::string timeout_path(const std::string& root, const std::string& key) {
  return (fs::path(root) / "timeouts" / (key + ".json")).string();
}

}  // namespace

void CompileCache::remember_timeout(const std::string& key, const std::string& origin, double limit_seconds,
                                    const CompileResult& result) const {
  // Concurrent writers race benignly: each writes a whole file, the larger limit usually last.
  if (const auto known = lookup_timeout(key, origin, limit_seconds)) return;
  const nlohmann::json json = {{"limit_seconds", limit_seconds}, {"log", result.log}, {"stage", result.stage},
                               {"origin", origin}, {"key", key}};
  try {
    write_file_atomically(timeout_path(root_, key), json.dump(1), /*durable=*/false);
  } catch (const Error&) {
    // Best effort: a read-only cache just compiles again next time.
  }
}

std::optional<CompileResult> CompileCache::lookup_timeout(const std::string& key, const std::string& origin,
                                                          double limit_seconds) const {
  std::string text;
  try {
    text = read_file(timeout_path(root_, key), "compile cache timeout record");
  } catch (const Error&) {
    return std::nullopt;
  }
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  CompileResult result;
  double limit = 0;
  try {
    limit = json.at("limit_seconds").get<double>();
    result.log = replace_all(json.at("log").get<std::string>(), json.at("origin").get<std::string>(), origin);
    result.stage = json.at("stage").get<std::string>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // damaged: as if absent
  }
  if (limit < limit_seconds) return std::nullopt;
  result.ok = false;
  result.key = key;
  result.cache_hit = true;
  result.log = fmt::format("[crl: not compiled again: this program timed out under a {} s limit before, and the "
                           "limit is {} s]\n",
                           limit, limit_seconds) +
               result.log;
  return result;
}

std::string CompileCache::objects_dir() const { return (fs::path(root_) / "objects").string(); }

std::string CompileCache::entry_dir(const std::string& key) const {
  return (fs::path(objects_dir()) / key.substr(0, 2) / key).string();
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
  std::string text;
  try {
    text = read_file(dir + "/" + kResultName, "compile cache entry");
  } catch (const Error&) {
    return std::nullopt;  // no entry (or an unreadable one): a miss
  }
  const auto json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
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
  if (++publishes_ % 32 == 0) prune(max_bytes_);
  result.key = key;
  result.library_path = result.ok ? dir + "/" + kLibraryName : "";
  result.object_paths = result.ok ? object_paths_in(dir) : std::vector<std::string>{};
  return result;
}

}  // namespace crl
