// The job file: defaults, every stage kind, and errors that name the file and the key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "rl/job_config.h"

namespace crl::rl {
namespace {

const char* kMinimal = R"(
name: t
model: models/tiny
stages:
  - {kind: crl, steps: 3}
)";

// The message of the InputError that parsing `text` throws ("" when it does not throw).
std::string error_of(const std::string& text) {
  try {
    parse_job_config(text, "job.yaml", "/base");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JobConfig, DefaultsOfAMinimalFile) {
  const JobConfig job = parse_job_config(kMinimal, "job.yaml", "/base");
  EXPECT_EQ(job.name, "t");
  EXPECT_EQ(job.model, "/base/models/tiny");  // relative to the job file's folder
  EXPECT_EQ(job.prompt_format, PromptFormat::kChat);
  EXPECT_EQ(job.backend, "cpu");
  EXPECT_EQ(job.trainers, 1);
  EXPECT_FALSE(job.share_gpu);
  ASSERT_EQ(job.stages.size(), 1u);
  const StageConfig& s = job.stages[0];
  EXPECT_EQ(s.kind, StageKind::kCrl);
  EXPECT_EQ(s.steps, 3);
  EXPECT_EQ(s.group, 16);
  EXPECT_EQ(s.exemplars, 2);
  EXPECT_EQ(s.reward.window, 100);
  EXPECT_DOUBLE_EQ(s.reward.clip, 1.5);
  EXPECT_DOUBLE_EQ(s.grpo.kl, 0.0);
  EXPECT_EQ(s.max_staleness, 0);
  EXPECT_EQ(job.eval.scale, "small");
  EXPECT_TRUE(job.eval.reuse_verdicts);
  EXPECT_EQ(job.eval.max_failed_steps, 3);
  EXPECT_EQ(job.eval.precision, "fp32");
  EXPECT_DOUBLE_EQ(job.eval.max_relative_ci, 0.1);
  EXPECT_EQ(job.as_json["stages"][0]["kind"], "crl");
}

TEST(JobConfig, EveryStageKindAndNestedKeys) {
  const JobConfig job = parse_job_config(R"(
name: full
seed: 7
model: /abs/model
prompt_format: raw
backend: cuda
dtype: bf16
roles: {trainers: 2}
share_gpu: true
tasks: {ids: [level1/019_relu], levels: [1, 2], categories: [activation]}
eval: {scale: full, trials: 4, time_budget: 5, call_timeout: 9, max_relative_ci: 0.25, timing: false, reuse_verdicts: false, max_failed_steps: 0, precision: tf32}
stages:
  - {kind: sft, data: data/sft.jsonl, epochs: 2, batch: 8, lr: 2.0e-5}
  - {kind: selftrain, steps: 2, G: 4, min_speedup: 1.1, sampling: {temperature: 0.7, max_new_tokens: 64}}
  - kind: crl
    steps: 5
    G: 8
    K: 3
    tau: 0.5
    sampling: {temperature: 0.9, top_p: 0.95, top_k: 50, max_new_tokens: 128}
    reward: {window: 50, clip: 2.0}
    grpo: {clip: 0.1, clip_high: 0.2, kl: 0.01}
    checkpoint: {every: 2, keep: 3}
)", "job.yaml", "/base");
  EXPECT_EQ(job.seed, 7u);
  EXPECT_EQ(job.model, "/abs/model");
  EXPECT_EQ(job.prompt_format, PromptFormat::kRaw);
  EXPECT_EQ(job.trainers, 2);
  EXPECT_TRUE(job.share_gpu);
  EXPECT_EQ(job.tasks.levels, (std::vector<int>{1, 2}));
  EXPECT_EQ(job.eval.trials, 4);
  EXPECT_FALSE(job.eval.timing);
  EXPECT_FALSE(job.eval.reuse_verdicts);
  EXPECT_EQ(job.eval.max_failed_steps, 0);
  EXPECT_EQ(job.eval.precision, "tf32");
  EXPECT_DOUBLE_EQ(job.eval.max_relative_ci, 0.25);
  ASSERT_EQ(job.stages.size(), 3u);
  EXPECT_EQ(job.stages[0].data, "/base/data/sft.jsonl");
  EXPECT_EQ(job.stages[0].epochs, 2);
  EXPECT_DOUBLE_EQ(job.stages[1].min_speedup, 1.1);
  EXPECT_EQ(job.stages[1].sampling.max_new_tokens, 64);
  const StageConfig& c = job.stages[2];
  EXPECT_EQ(c.exemplars, 3);
  EXPECT_DOUBLE_EQ(c.tau, 0.5);
  EXPECT_EQ(c.sampling.top_k, 50);
  EXPECT_EQ(c.reward.window, 50);
  EXPECT_DOUBLE_EQ(c.grpo.clip_high, 0.2);
  EXPECT_EQ(c.checkpoint.keep, 3);
}

// The precision a job allows is fp32 or tf32, nothing else (a typo must not turn the contract off).
TEST(JobConfig, EvalPrecisionIsFp32OrTf32) {
  const std::string e = error_of("name: t\nmodel: m\neval: {precision: fp16}\nstages: [{kind: crl}]\n");
  EXPECT_NE(e.find("precision"), std::string::npos) << e;
  EXPECT_NE(e.find("fp16"), std::string::npos) << e;
}

TEST(JobConfig, UnknownKeysAreRefusedWithTheirPath) {
  EXPECT_NE(error_of("name: t\nmodel: m\nstage: []\n").find("unknown key 'stage'"), std::string::npos);
  const std::string nested = error_of("name: t\nmodel: m\nstages:\n  - {kind: crl, sampling: {temprature: 1}}\n");
  EXPECT_NE(nested.find("stages[0].sampling.temprature"), std::string::npos) << nested;
  EXPECT_NE(nested.find("job.yaml:4"), std::string::npos) << nested;
}

// fuzz_job_config's finding: a key that is a list (YAML's `? - a`) escaped as a yaml-cpp conversion
// error; anywhere in the file it is bad input with the line it is on.
TEST(JobConfig, KeysThatAreListsOrMappingsAreBadInput) {
  const std::string top = error_of("name: t\n? - a\n: 1\nmodel: m\nstages: [{kind: crl}]\n");
  EXPECT_NE(top.find("keys must be plain names"), std::string::npos) << top;
  EXPECT_NE(top.find("job.yaml:2"), std::string::npos) << top;
  const std::string nested = error_of("name: t\nmodel: m\nstages: [{kind: crl, sampling: {[a, b]: 1}}]\n");
  EXPECT_NE(nested.find("keys must be plain names"), std::string::npos) << nested;
  std::ifstream regression(std::string(CRL_SOURCE_DIR) + "/tests/fuzz/corpus/fuzz_job_config/regression-list-as-key");
  const std::string fuzzed((std::istreambuf_iterator<char>(regression)), std::istreambuf_iterator<char>());
  ASSERT_FALSE(fuzzed.empty());
  EXPECT_NE(error_of(fuzzed), "");
}

TEST(JobConfig, BadValuesNameTheKey) {
  EXPECT_NE(error_of("name: t\nstages: [{kind: crl}]\n").find("missing key 'model'"), std::string::npos);
  EXPECT_NE(error_of("name: t\nmodel: m\nstages: [{kind: ppo}]\n").find("stages[0].kind"), std::string::npos);
  const std::string range = error_of("name: t\nmodel: m\nstages: [{kind: crl, sampling: {top_p: 2}}]\n");
  EXPECT_NE(range.find("stages[0].sampling.top_p"), std::string::npos) << range;
  EXPECT_NE(range.find("[1e-09, 1]"), std::string::npos) << range;
  EXPECT_NE(error_of("name: t\nmodel: m\nprompt_format: html\nstages: [{kind: crl}]\n").find("'prompt_format'"),
            std::string::npos);
  EXPECT_NE(error_of("name: t\nmodel: m\nstages: [{kind: crl, G: many}]\n").find("wrong type"), std::string::npos);
  EXPECT_NE(error_of("name: t\nmodel: m\nstages: []\n").find("non-empty list"), std::string::npos);
  EXPECT_NE(error_of("name: t\nmodel: m\nstages: [{kind: sft}]\n").find("stages[0].data"), std::string::npos);
  EXPECT_NE(error_of("name: t\nmodel: m\nroles: {trainers: 0}\nstages: [{kind: crl}]\n").find("roles.trainers"),
            std::string::npos);
}

TEST(JobConfig, StalenessGenerationAndLoraKeys) {
  const JobConfig job = parse_job_config(R"(
name: t
model: m
generation: {kv_cache_mib: 32, max_running: 64}
lora: {rank: 4, alpha: 8, dropout: 0.1, targets: [q_proj, v_proj]}
stages:
  - {kind: crl, max_staleness: 1}
)", "job.yaml", "/base");
  EXPECT_EQ(job.stages[0].max_staleness, 1);
  EXPECT_EQ(job.generation.kv_cache_bytes("cpu"), int64_t{32} << 20);
  EXPECT_EQ(job.generation.max_running, 64);
  EXPECT_TRUE(job.lora.enabled);
  EXPECT_EQ(job.lora.rank, 4);
  EXPECT_DOUBLE_EQ(job.lora.alpha, 8.0);
  EXPECT_DOUBLE_EQ(job.lora.dropout, 0.1);
  EXPECT_EQ(job.lora.targets, (std::vector<std::string>{"q_proj", "v_proj"}));
  // Defaults: no LoRA, a pool sized by backend.
  const JobConfig plain = parse_job_config(kMinimal, "job.yaml", "/base");
  EXPECT_FALSE(plain.lora.enabled);
  EXPECT_EQ(plain.generation.kv_cache_bytes("cpu"), int64_t{64} << 20);
  EXPECT_EQ(plain.generation.kv_cache_bytes("cuda"), int64_t{1024} << 20);
  EXPECT_NE(error_of("name: t\nmodel: m\nstages: [{kind: crl, max_staleness: 2}]\n").find("stages[0].max_staleness"), std::string::npos);
  EXPECT_NE(error_of("name: t\nmodel: m\nlora: {targets: [lm_head]}\nstages: [{kind: crl}]\n").find("lora.targets"), std::string::npos);
  EXPECT_NE(error_of("name: t\nmodel: m\nlora: {rank: 0}\nstages: [{kind: crl}]\n").find("lora.rank"), std::string::npos);
  EXPECT_NE(error_of("name: t\nmodel: m\ngeneration: {kv_cache_mb: 3}\nstages: [{kind: crl}]\n").find("generation.kv_cache_mb"),
            std::string::npos);
}

TEST(JobConfig, MicroBatchSizeIsAKeyWithItsRange) {
  EXPECT_EQ(parse_job_config(kMinimal, "job.yaml", "/base").micro_batch_size, 4);
  const JobConfig job = parse_job_config("name: t\nmodel: m\nmicro_batch_size: 1\nstages: [{kind: crl}]\n", "job.yaml", "/base");
  EXPECT_EQ(job.micro_batch_size, 1);
  for (const char* bad : {"0", "4097", "two"}) {
    const std::string e = error_of(fmt::format("name: t\nmodel: m\nmicro_batch_size: {}\nstages: [{{kind: crl}}]\n", bad));
    EXPECT_NE(e.find("'micro_batch_size'"), std::string::npos) << bad << ": " << e;
  }
}

// checkpoint.every_minutes bounds what a kill loses: on by default (30), fractions allowed, 0 off,
// a negative or a word is bad input naming the key and its line.
TEST(JobConfig, CheckpointEveryMinutes) {
  EXPECT_DOUBLE_EQ(parse_job_config(kMinimal, "job.yaml", "/base").stages[0].checkpoint.every_minutes, 30.0);
  const JobConfig job =
      parse_job_config("name: t\nmodel: m\nstages:\n  - {kind: crl, checkpoint: {every_minutes: 0.5}}\n  - {kind: crl, checkpoint: {every_minutes: 0}}\n",
                       "job.yaml", "/base");
  EXPECT_DOUBLE_EQ(job.stages[0].checkpoint.every_minutes, 0.5);
  EXPECT_DOUBLE_EQ(job.stages[1].checkpoint.every_minutes, 0.0);
  const std::string negative = error_of("name: t\nmodel: m\nstages:\n  - {kind: crl, checkpoint: {every_minutes: -1}}\n");
  EXPECT_NE(negative.find("job.yaml:4"), std::string::npos) << negative;
  EXPECT_NE(negative.find("stages[0].checkpoint.every_minutes' is -1"), std::string::npos) << negative;
  EXPECT_NE(error_of("name: t\nmodel: m\nstages: [{kind: crl, checkpoint: {every_minutes: soon}}]\n").find("wrong type"),
            std::string::npos);
}

TEST(JobConfig, ValidationKeysAndTheirDefaults) {
  const JobConfig none = parse_job_config(kMinimal, "job.yaml", "/base");
  EXPECT_FALSE(none.validation.enabled);
  const JobConfig job = parse_job_config(std::string(kMinimal) + "validation: {tasks: {levels: [2]}, G: 3}\n", "job.yaml", "/base");
  ASSERT_TRUE(job.validation.enabled);
  EXPECT_EQ(job.validation.tasks.levels, std::vector<int>{2});
  EXPECT_EQ(job.validation.group, 3);
  EXPECT_EQ(job.validation.every, 10);
  EXPECT_EQ(job.validation.sampling.max_new_tokens, SamplingConfig{}.max_new_tokens);
  EXPECT_EQ(job.validation.where, "job.yaml:6");  // the line of validation.tasks, for the held-out checks
}

TEST(JobConfig, BadValidationKeysNameFileLineAndKey) {
  EXPECT_NE(error_of(std::string(kMinimal) + "validation: {every: 2}\n").find("job.yaml:6: missing key 'validation.tasks'"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "validation: {tasks: {}}\n").find("'validation.tasks' selects nothing"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "validation: {tasks: {ids: [a]}, every: 0}\n").find("'validation.every' is 0"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "validation: {tasks: {ids: [a]}, sampling: {top_p: 2}}\n")
                .find("'validation.sampling.top_p' is 2"),
            std::string::npos);
  EXPECT_NE(error_of(std::string(kMinimal) + "validation: {tasks: {ids: [a]}, K: 2}\n").find("unknown key 'validation.K'"),
            std::string::npos);
  // Validation runs during the generating stages: a job of sft stages only has none to run in.
  const std::string sft_only = "name: t\nmodel: m\nstages:\n  - {kind: sft, data: d.jsonl}\nvalidation: {tasks: {ids: [a]}}\n";
  EXPECT_NE(error_of(sft_only).find("job.yaml:5: 'validation' runs during the generating stages"), std::string::npos) << error_of(sft_only);
}

TEST(JobConfig, KeysOfAnotherStageKindAreRefused) {
  const std::string e = error_of("name: t\nmodel: m\nstages: [{kind: sft, data: d.jsonl, K: 2}]\n");
  EXPECT_NE(e.find("'stages[0].K' does not apply to a stage of kind sft"), std::string::npos) << e;
  EXPECT_NE(error_of("name: t\nmodel: m\nstages: [{kind: crl, epochs: 2}]\n").find("stages[0].epochs"),
            std::string::npos);
}

TEST(JobConfig, MissingFileAndSyntaxErrorsNameTheFile) {
  EXPECT_THROW(load_job_config("/nonexistent/job.yaml"), InputError);
  const std::string path = testing::TempDir() + "/bad_job.yaml";
  std::ofstream(path) << "name: [unclosed\n";
  try {
    load_job_config(path);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

TEST(JobConfig, ShippedJobFilesParse) {
  for (const char* name : {"ci.yaml"}) {
    const JobConfig job = load_job_config(std::string(CRL_SOURCE_DIR) + "/jobs/" + name);
    EXPECT_FALSE(job.stages.empty()) << name;
  }
}

// Every ```yaml block of jobs/README.md is a whole job file that parses: the examples stay true.
TEST(JobConfig, ReadmeExamplesParse) {
  std::ifstream in(std::string(CRL_SOURCE_DIR) + "/jobs/README.md");
  ASSERT_TRUE(in) << "jobs/README.md is missing";
  std::string line, block;
  bool inside = false;
  int blocks = 0;
  while (std::getline(in, line)) {
    if (!inside && line == "```yaml") {
      inside = true;
      block.clear();
    } else if (inside && line == "```") {
      inside = false;
      ++blocks;
      EXPECT_NO_THROW(parse_job_config(block, "jobs/README.md block " + std::to_string(blocks), "/base")) << block;
    } else if (inside) {
      block += line + "\n";
    }
  }
  EXPECT_GE(blocks, 3) << "jobs/README.md should show an example per stage kind";
}

}  // namespace
}  // namespace crl::rl
