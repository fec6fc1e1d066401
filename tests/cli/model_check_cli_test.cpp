// `crl run` with a missing or broken model folder, as a user types it (issue 43, item 7): exit 3 with
// a message naming the job file, the folder and what is wrong in it, before any results.h5 exists:
// by hand (crl checks before it starts mpirun) and through the ranks (the built-in default job's
// mpirun). A good folder passes the same check and the job runs.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/remove_tree.h"
#include "core/subprocess.h"

namespace crl {
namespace {

namespace fs = std::filesystem;

const std::map<std::string, std::string> kMpirunEnv = {{"OMPI_ALLOW_RUN_AS_ROOT", "1"}, {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"}};

class ModelCheckCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::path(::testing::TempDir()) / fmt::format("crl_model_check_{}", ::getpid());
    remove_tree(dir_);
    fs::create_directories(dir_);
    for (const auto& [name, vocab] : {std::pair{"good", "400"}, std::pair{"small", "300"}}) {
      const auto r = crl({"init-model", "--out", (dir_ / name).string(), "--corpus",
                          (fs::path(CRL_TEST_DATA_DIR) / "policy" / "tokenizers" / "train_corpus.txt").string(), "--vocab-size",
                          vocab, "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1", "--seed", "3"});
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
  }
  static void TearDownTestSuite() { remove_tree(dir_); }

  static CommandResult crl(std::vector<std::string> args) {
    args.insert(args.begin(), CRL_FRONT_EXE);
    return run_command(args, {.timeout = std::chrono::seconds(120), .env = kMpirunEnv});
  }
  // A one-rank SFT job (the model comes from --model).
  static fs::path job(const std::string& prompt_format = "raw") {
    const fs::path path = dir_ / fmt::format("job-{}.yaml", prompt_format);
    std::ofstream(path) << fmt::format(
        "name: model-check\nmodel: unused\nprompt_format: {}\nbackend: cpu\nroles: {{trainers: 1}}\ninstructions: {}\n"
        "tasks: {{ids: [level1/019_relu]}}\nstages:\n  - {{kind: sft, data: {}, epochs: 1, batch: 2}}\n",
        prompt_format, (fs::path(CRL_SOURCE_DIR) / "jobs" / "data" / "ci_instructions.md").string(),
        (fs::path(CRL_SOURCE_DIR) / "jobs" / "data" / "ci_sft.jsonl").string());
    return path;
  }
  // A copy of the good model folder, broken by `breaking`.
  static fs::path broken(const std::string& name, const std::function<void(const fs::path&)>& breaking) {
    const fs::path copy = dir_ / name;
    remove_tree(copy);
    fs::copy(dir_ / "good", copy);
    breaking(copy);
    return copy;
  }
  static void write(const fs::path& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

  // `crl run JOB --model MODEL --run-dir RUN`: exit 3 naming the job file, the folder and `what`, and no results.h5.
  static void expect_refused(const fs::path& model, const std::string& what, const std::string& prompt_format = "raw") {
    const fs::path run_dir = dir_ / ("run-" + model.filename().string());
    const fs::path job_file = job(prompt_format);
    const CommandResult r = crl({"run", job_file.string(), "--model", model.string(), "--run-dir", run_dir.string()});
    EXPECT_EQ(r.exit_code, 3) << r.output;
    for (const std::string& part : {job_file.string() + ": model '" + model.string() + "'", what}) {
      EXPECT_NE(r.output.find(part), std::string::npos) << "no '" << part << "' in: " << r.output;
    }
    EXPECT_FALSE(fs::exists(run_dir / "results.h5")) << r.output;
  }

  static fs::path dir_;
};
fs::path ModelCheckCli::dir_;

TEST_F(ModelCheckCli, AMissingFolder) { expect_refused(dir_ / "nowhere", "does not exist"); }

TEST_F(ModelCheckCli, NoTokenizer) {
  expect_refused(broken("no-tokenizer", [](const fs::path& m) { fs::remove(m / "tokenizer.json"); }), "tokenizer.json");
}

TEST_F(ModelCheckCli, ATokenizerThatIsNotJson) {
  expect_refused(broken("bad-tokenizer", [](const fs::path& m) { write(m / "tokenizer.json", "{\"model\": {\"type\": \"BPE\""); }),
                 "tokenizer.json: not valid JSON");
}

TEST_F(ModelCheckCli, ATokenizerLargerThanTheModelsVocabulary) {
  // The 300-token model with the 400-token model's tokenizer: ids it cannot embed.
  const fs::path model = dir_ / "small-with-large-tokenizer";
  remove_tree(model);
  fs::copy(dir_ / "small", model);
  fs::copy_file(dir_ / "good" / "tokenizer.json", model / "tokenizer.json", fs::copy_options::overwrite_existing);
  expect_refused(model, "the tokenizer has 400 ids but config.json's vocab_size is 300");
}

TEST_F(ModelCheckCli, NoWeights) {
  expect_refused(broken("no-weights", [](const fs::path& m) { fs::remove(m / "model.safetensors"); }),
                 "holds neither model.safetensors.index.json nor model.safetensors");
}

TEST_F(ModelCheckCli, TruncatedWeights) {
  expect_refused(broken("truncated-weights", [](const fs::path& m) { fs::resize_file(m / "model.safetensors", 100); }),
                 "model.safetensors");
}

TEST_F(ModelCheckCli, AConfigTheWeightsDoNotFit) {
  expect_refused(broken("other-config",
                        [](const fs::path& m) {
                          auto config = nlohmann::json::parse(std::ifstream(m / "config.json"));
                          config["hidden_size"] = 64;
                          config["head_dim"] = 32;
                          write(m / "config.json", config.dump());
                        }),
                 "but config.json implies");
}

TEST_F(ModelCheckCli, NoChatTemplateForPromptFormatChat) {
  expect_refused(dir_ / "good", "no 'chat_template'", "chat");
}

TEST_F(ModelCheckCli, TheDefaultJobsRanksRefuseItToo) {
  // `crl run --model DIR` without a job file starts mpirun with the built-in job: each rank checks.
  const fs::path model = broken("default-no-tokenizer", [](const fs::path& m) { fs::remove(m / "tokenizer.json"); });
  const fs::path run_dir = dir_ / "run-default";
  const CommandResult r = crl({"run", "--model", model.string(), "--run-dir", run_dir.string()});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("model '" + model.string() + "'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokenizer.json"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(run_dir / "results.h5")) << r.output;
}

TEST_F(ModelCheckCli, AGoodFolderPassesAndTheJobRuns) {
  const fs::path run_dir = dir_ / "run-good";
  const CommandResult r = crl({"run", job().string(), "--model", (dir_ / "good").string(), "--run-dir", run_dir.string()});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(run_dir / "results.h5")) << r.output;
}

}  // namespace
}  // namespace crl
