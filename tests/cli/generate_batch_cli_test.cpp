// `crl generate --batch-file FILE` as a user types it (issue 43, item 7): each request's own
// "max_new_tokens" is honoured up to the stated maximum (65536), not capped at --max-new-tokens'
// default of 128, which stays the limit of the requests that give none; a limit out of range is bad
// input naming the line.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/remove_tree.h"
#include "core/subprocess.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

class GenerateBatchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("crl_generate_batch_{}", ::getpid());
    remove_tree(dir_);
    fs::create_directories(dir_);
    const auto r = crl({"init-model", "--out", model().string(), "--corpus",
                        (fs::path(CRL_TEST_DATA_DIR) / "policy" / "tokenizers" / "train_corpus.txt").string(), "--vocab-size", "300",
                        "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1", "--seed", "3"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { remove_tree(dir_); }

  static fs::path model() { return dir_ / "model"; }
  static CommandResult crl(std::vector<std::string> args) {
    args.insert(args.begin(), CRL_FRONT_EXE);
    return run_command(args, {.timeout = std::chrono::seconds(120)});
  }
  static fs::path batch(const std::string& name, const std::string& lines) {
    std::ofstream(dir_ / name) << lines;
    return dir_ / name;
  }
  // The completions' lengths of `crl generate --batch-file FILE --ignore-eos --json [extra]`.
  static std::vector<size_t> lengths(const fs::path& file, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"generate", "--model", model().string(), "--batch-file", file.string(), "--ignore-eos", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const CommandResult r = crl(args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const auto begin = r.output.find('{');
    if (r.exit_code != 0 || begin == std::string::npos) return {};
    std::vector<size_t> out;
    const nlohmann::json result = nlohmann::json::parse(r.output.substr(begin, r.output.rfind('}') + 1 - begin));
    for (const auto& c : result["completions"]) {
      out.push_back(c["tokens"].size());
      EXPECT_EQ(c["finish_reason"], "length");
    }
    return out;
  }

  static fs::path dir_;
};
fs::path GenerateBatchCli::dir_;

TEST_F(GenerateBatchCli, EachRequestKeepsItsOwnLimit) {
  const fs::path file = batch("limits.jsonl",
                              "{\"prompt_ids\": [5, 6], \"max_new_tokens\": 300}\n"
                              "{\"prompt_ids\": [7]}\n"
                              "{\"prompt\": \"__global__ void\", \"max_new_tokens\": 3, \"samples\": 2}\n");
  // Above the default 128, below it, and without one (the default).
  EXPECT_EQ(lengths(file), (std::vector<size_t>{300, 128, 3, 3}));
  // --max-new-tokens is the limit of the request without one; the others keep theirs.
  EXPECT_EQ(lengths(file, {"--max-new-tokens", "10"}), (std::vector<size_t>{300, 10, 3, 3}));
}

TEST_F(GenerateBatchCli, ALimitOutOfRangeIsBadInputNamingTheLine) {
  for (const std::string limit : {"65537", "0", "-4", "\"12\"", "1.5"}) {
    const fs::path file = batch("bad.jsonl", "{\"prompt_ids\": [5]}\n{\"prompt_ids\": [6], \"max_new_tokens\": " + limit + "}\n");
    const CommandResult r = crl({"generate", "--model", model().string(), "--batch-file", file.string()});
    EXPECT_EQ(r.exit_code, 3) << limit << ": " << r.output;
    EXPECT_NE(r.output.find(file.string() + ":2: field \"max_new_tokens\": expected an integer in [1, 65536]"), std::string::npos)
        << limit << ": " << r.output;
  }
  // The option itself has the same bound (a usage error, as CLI11 reports a range).
  const CommandResult r = crl({"generate", "--model", model().string(), "--prompt-ids", "5", "--max-new-tokens", "65537"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
}

}  // namespace
}  // namespace crl
