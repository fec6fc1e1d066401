// Runs the built `crl` on malformed inputs (config.json, tokenizer.json, task specs, a .crl with
// a byte-order mark): each is bad input, exit 3, with a message naming the file and the field.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/remove_tree.h"
#include "core/subprocess.h"

namespace crl {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kModels = fs::path(CRL_TEST_DATA_DIR) / "policy" / "models";
const fs::path kTokenizers = fs::path(CRL_TEST_DATA_DIR) / "policy" / "tokenizers";

class BadInputCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           fmt_name(::testing::UnitTest::GetInstance()->current_test_info()->name());
    remove_tree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { remove_tree(dir_); }

  static std::string fmt_name(const std::string& test) { return "crl_bad_input_" + test + "_" + std::to_string(::getpid()); }

  // A copy of the tiny qwen2 test model (config.json, model.safetensors) with `edit` applied to its
  // config, and optionally a tokenizer.json.
  fs::path model_dir(const std::function<void(json&)>& edit, const json* tokenizer = nullptr) {
    const fs::path model = dir_ / "model";
    fs::create_directories(model);
    fs::copy_file(kModels / "qwen2_gqa2_tied" / "model.safetensors", model / "model.safetensors");
    json config = json::parse(std::ifstream(kModels / "qwen2_gqa2_tied" / "config.json"));
    edit(config);
    std::ofstream(model / "config.json") << config.dump();
    if (tokenizer) std::ofstream(model / "tokenizer.json") << tokenizer->dump();
    return model;
  }

  CommandResult generate(const fs::path& model) {
    return run_command({CRL_EXE, "generate", "--model", model.string(), "--prompt-ids", "1", "--max-new-tokens", "1"});
  }

  // A one-task suite whose flops expression is `flops`; `prefix` goes before the file's text.
  fs::path suite_with_flops(const std::string& flops, const std::string& prefix = "") {
    const fs::path suite = dir_ / "suite";
    fs::create_directories(suite / "level1");
    std::ofstream(suite / "level1" / "001_copy.crl", std::ios::binary)
        << prefix << "// crl:spec\n"
        << "task: level1/001_copy\nname: Copy\ncategory: reduction\ndescription: y = x\n"
        << "inputs:\n  - {name: x, shape: [n], dtype: float32, init: rand}\n"
        << "scales:\n  full: {n: 1024}\n  small: {n: 16}\n"
        << "flops: " << flops << "\nbytes: 8 * n\n"
        << "// crl:host\nat::Tensor forward(const at::Tensor& x) { return x.clone(); }\n";
    return suite;
  }

  fs::path dir_;
};

void expect_bad_input(const CommandResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.exit_code, 3) << r.output;
  for (const auto& part : parts) EXPECT_NE(r.output.find(part), std::string::npos) << "no '" << part << "' in: " << r.output;
}

TEST_F(BadInputCli, ConfigFloatTooLargeForAnIntegerField) {
  const auto model = model_dir([](json& c) { c["num_hidden_layers"] = 1e30; });
  expect_bad_input(generate(model), {"config.json", "\"num_hidden_layers\": 1e+30 does not fit in 64 bits"});
}

TEST_F(BadInputCli, ConfigSizeAboveTheLimit) {
  const auto model = model_dir([](json& c) { c["vocab_size"] = 1LL << 40; });
  expect_bad_input(generate(model), {"config.json", "\"vocab_size\"", "above crl's limit"});
}

TEST_F(BadInputCli, ConfigLargerThanItsCheckpointIsRefusedBeforeBuilding) {
  const auto model = model_dir([](json& c) {
    c["vocab_size"] = 1 << 22;
    c["hidden_size"] = 1 << 16;
    c["head_dim"] = 64;
  });
  expect_bad_input(generate(model), {"model.embed_tokens.weight", "config.json implies 4194304x65536"});
}

TEST_F(BadInputCli, TokenizerIdOutsideTheVocabulary) {
  json tokenizer = json::parse(std::ifstream(kTokenizers / "qwen2_like" / "tokenizer.json"));
  tokenizer["added_tokens"][3]["id"] = 2147483647;
  const auto model = model_dir([](json&) {}, &tokenizer);
  expect_bad_input(generate(model), {"tokenizer.json", "added_tokens[3].id"});
}

TEST_F(BadInputCli, TokenizerWithTruncation) {
  json tokenizer = json::parse(std::ifstream(kTokenizers / "qwen2_like" / "tokenizer.json"));
  tokenizer["truncation"] = {{"max_length", 4}};
  const auto model = model_dir([](json&) {}, &tokenizer);
  expect_bad_input(generate(model), {"tokenizer.json", "truncation: must be null"});
}

TEST_F(BadInputCli, SpecExpressionOverflowIsBadInputNotSigfpe) {
  const auto suite = suite_with_flops("(-9223372036854775807 - 1) // -1");
  expect_bad_input(run_command({CRL_EXE, "tasks", "list", "--suite", suite.string()}),
                   {"001_copy.crl", "integer overflow"});
}

TEST_F(BadInputCli, DeeplyNestedSpecExpressionIsBadInputNotSigsegv) {
  const auto suite = suite_with_flops(std::string(100000, '(') + "n" + std::string(100000, ')'));
  expect_bad_input(run_command({CRL_EXE, "tasks", "list", "--suite", suite.string()}),
                   {"001_copy.crl", "nested parentheses"});
}

TEST_F(BadInputCli, ProgramWithAByteOrderMarkLoads) {
  const auto suite = suite_with_flops("2 * n", "\xEF\xBB\xBF");
  const auto r = run_command({CRL_EXE, "tasks", "list", "--suite", suite.string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("level1/001_copy"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace crl
