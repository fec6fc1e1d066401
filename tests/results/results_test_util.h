// Helpers for the results tests: a scratch directory per test and whole-file reads.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/read_file.h"
#include "core/remove_tree.h"

namespace crl::results::testing {

using crl::remove_tree;

// A fresh directory under the test temp dir, removed with everything in it at the end of a test.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            (std::string("crl_results_") + info->test_suite_name() + "_" + info->name() + "_" +
             std::to_string(::getpid()));
    remove_tree(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { remove_tree(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string read_bytes(const std::string& path) { return crl::read_file(path, "test file"); }

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

}  // namespace crl::results::testing
