// Tests of the compile cache's directory protocol: publish races, damaged entries, stale build dirs.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "compile/compile_cache.h"
#include "compile_test_util.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

std::string fresh_root() {
  const std::string root = testing::test_cache_dir() + "-protocol/" + testing::unique_tag();
  remove_tree(root);
  return root;
}

TEST(CompileCache, SecondPublisherOfAKeyKeepsTheFirstEntry) {
  const std::string root = fresh_root();
  const CompileCache cache(root);
  const std::string key(64, 'a');
  EXPECT_FALSE(cache.lookup(key, "x.crl").has_value());
  const std::string first = cache.make_build_dir(), second = cache.make_build_dir();
  std::ofstream(first + "/program.so") << "first";
  std::ofstream(second + "/program.so") << "second";
  CompileResult ok;
  ok.ok = true;
  ok.log = "warning in one.crl:3";
  const CompileResult a = cache.publish(first, key, "one.crl", ok);
  const CompileResult b = cache.publish(second, key, "two.crl", ok);
  EXPECT_EQ(a.library_path, b.library_path);
  EXPECT_FALSE(fs::exists(first));
  EXPECT_FALSE(fs::exists(second));
  std::ifstream in(a.library_path);
  std::string content;
  in >> content;
  EXPECT_EQ(content, "first");
  const auto hit = cache.lookup(key, "three.crl");
  ASSERT_TRUE(hit.has_value());
  EXPECT_TRUE(hit->cache_hit);
  EXPECT_EQ(hit->log, "warning in three.crl:3");
  remove_tree(root);
  EXPECT_FALSE(fs::exists(root));
}

TEST(CompileCache, DamagedEntriesAreMisses) {
  const std::string root = fresh_root();
  const CompileCache cache(root);
  const std::string key(64, 'b');
  fs::create_directories(cache.entry_dir(key));
  std::ofstream(cache.entry_dir(key) + "/result.json") << "{not json";
  EXPECT_FALSE(cache.lookup(key, "x").has_value());
  std::ofstream(cache.entry_dir(key) + "/result.json") << R"({"ok": true, "log": "", "stage": "", "origin": "o"})";
  EXPECT_FALSE(cache.lookup(key, "x").has_value());  // ok, but its library is missing
  remove_tree(root);
}

TEST(CompileCache, PruneRemovesTheLeastRecentlyUsedEntriesFirst) {
  const std::string root = fresh_root();
  const CompileCache cache(root);
  CompileResult ok;
  ok.ok = true;
  std::vector<std::string> keys;
  for (char c : {'c', 'd', 'e'}) {
    const std::string key(64, c), dir = cache.make_build_dir();
    std::ofstream(dir + "/program.so") << std::string(10000, 'x');
    cache.publish(dir, key, "o", ok);
    keys.push_back(key);
  }
  // Every entry was used within the hour: none may go, whatever the size.
  EXPECT_EQ(cache.prune(0, std::chrono::hours(1)), 0u);
  const auto set_used = [&](const std::string& key, time_t when) {
    const struct timespec times[2] = {{when, 0}, {when, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, (cache.entry_dir(key) + "/result.json").c_str(), times, 0), 0);
  };
  set_used(keys[0], 1000000000);  // c: 2001
  set_used(keys[1], 1020000000);  // d: 2002
  set_used(keys[2], 1030000000);  // e: 2002 (later)
  ASSERT_TRUE(cache.lookup(keys[0], "o").has_value());  // a hit: c is now the most recently used
  EXPECT_EQ(cache.prune(25000, std::chrono::hours(1)), 1u);  // 3 x ~10 kB -> one must go: d
  EXPECT_TRUE(cache.lookup(keys[0], "o").has_value());
  EXPECT_FALSE(cache.lookup(keys[1], "o").has_value());
  EXPECT_TRUE(cache.lookup(keys[2], "o").has_value());
  remove_tree(root);
}

// The cache keeps itself within its byte budget without being asked: every 32nd publish prunes.
TEST(CompileCache, PrunesItselfToItsBudgetAsEntriesArePublished) {
  const std::string root = fresh_root();
  const CompileCache cache(root, /*max_bytes=*/100000);
  CompileResult ok;
  ok.ok = true;
  for (int i = 0; i < 32; ++i) {
    const std::string key = fmt::format("{:064x}", i + 1), dir = cache.make_build_dir();
    std::ofstream(dir + "/program.so") << std::string(10000, 'x');
    cache.publish(dir, key, "o", ok);
    // Old enough to be prunable (prune spares entries used within the hour).
    const struct timespec times[2] = {{1000000000 + i, 0}, {1000000000 + i, 0}};
    ASSERT_EQ(utimensat(AT_FDCWD, (cache.entry_dir(key) + "/result.json").c_str(), times, 0), 0);
  }
  // The 32nd publish pruned: the oldest went, the newest stayed, and about 100 kB are left.
  int left = 0;
  for (int i = 0; i < 32; ++i) left += cache.lookup(fmt::format("{:064x}", i + 1), "o").has_value() ? 1 : 0;
  EXPECT_GE(left, 8);
  EXPECT_LE(left, 10);
  EXPECT_FALSE(cache.lookup(fmt::format("{:064x}", 1), "o").has_value());
  EXPECT_TRUE(cache.lookup(fmt::format("{:064x}", 32), "o").has_value());
  remove_tree(root);
}

TEST(CompileCache, TimeoutsAreRememberedWithTheirLimit) {
  const std::string root = fresh_root();
  const CompileCache cache(root);
  const std::string key(64, 'f');
  EXPECT_FALSE(cache.lookup_timeout(key, "x.crl", 10).has_value());
  CompileResult timed_out;
  timed_out.stage = "host";
  timed_out.log = "[crl: host compile timed out]\nin one.crl";
  cache.remember_timeout(key, "one.crl", 10, timed_out);
  const auto same = cache.lookup_timeout(key, "two.crl", 10);
  ASSERT_TRUE(same.has_value());
  EXPECT_FALSE(same->ok);
  EXPECT_TRUE(same->cache_hit);
  EXPECT_EQ(same->stage, "host");
  EXPECT_NE(same->log.find("timed out under a 10 s limit before, and the limit is 10 s"), std::string::npos) << same->log;
  EXPECT_NE(same->log.find("in two.crl"), std::string::npos) << same->log;
  EXPECT_TRUE(cache.lookup_timeout(key, "x", 5).has_value());    // a shorter limit would time out too
  EXPECT_FALSE(cache.lookup_timeout(key, "x", 20).has_value());  // a longer one deserves a try
  cache.remember_timeout(key, "x", 20, timed_out);
  EXPECT_TRUE(cache.lookup_timeout(key, "x", 20).has_value());
  EXPECT_FALSE(cache.lookup(key, "x").has_value());  // never a compile result
  remove_tree(root);
}

TEST(CompileCache, StaleBuildDirsAreRemoved) {
  const std::string root = fresh_root();
  const CompileCache cache(root);
  const std::string old_dir = cache.make_build_dir(), new_dir = cache.make_build_dir();
  std::ofstream(old_dir + "/host.cpp") << "x";
  const struct timespec times[2] = {{0, UTIME_OMIT}, {1000000000, 0}};  // mtime in 2001
  ASSERT_EQ(utimensat(AT_FDCWD, old_dir.c_str(), times, 0), 0);
  cache.remove_stale_build_dirs(std::chrono::hours(1));
  EXPECT_FALSE(fs::exists(old_dir));
  EXPECT_TRUE(fs::exists(new_dir));
  remove_tree(root);
}

}  // namespace
}  // namespace crl
