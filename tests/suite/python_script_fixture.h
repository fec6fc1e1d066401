// A test fixture for crl's Python tools (tools/suite, tools/bench) run with the venv's Python in a
// scratch folder: skipped, saying why, where that Python lacks torch or yaml.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/read_file.h"
#include "core/remove_tree.h"
#include "core/subprocess.h"
#include "venv_python.h"

namespace crl::testing {

class PythonScriptTest : public ::testing::Test {
 protected:
  // `script`: the tool's path under the source tree; `scratch`: a name for the scratch folder.
  PythonScriptTest(std::string script, std::string scratch, std::chrono::seconds timeout)
      : script_(std::string(CRL_SOURCE_DIR) + "/" + std::move(script)), scratch_(std::move(scratch)), timeout_(timeout) {}

  void SetUp() override {
    python_ = venv_python();
    if (!std::filesystem::exists(python_)) GTEST_SKIP() << "no crl venv python at " << python_;
    const auto probe = run_command({python_, "-c", "import torch, yaml"});
    if (!probe.ok()) GTEST_SKIP() << "torch or yaml missing in " << python_ << ": " << probe.output;
    dir_ = std::filesystem::path(::testing::TempDir()) / (scratch_ + "_" + std::to_string(::getpid()));
    remove_tree(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) remove_tree(dir_);
  }
  void write(const std::string& relative, const std::string& text) {
    const auto path = dir_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  std::string read(const std::string& relative) { return read_file((dir_ / relative).string(), "test file"); }
  // The tool with `args`, on the CPU (no GPU visible).
  CommandResult run_script(std::vector<std::string> args) {
    args.insert(args.begin(), {python_, script_});
    CommandOptions options;
    options.timeout = timeout_;
    options.env["CUDA_VISIBLE_DEVICES"] = "";
    return run_command(args, options);
  }

  std::string python_;
  std::filesystem::path dir_;

 private:
  std::string script_, scratch_;
  std::chrono::seconds timeout_;
};

}  // namespace crl::testing
