// The commands that judge many candidates (`crl eval` on a JSONL or a folder, `crl data validate`)
// as a user types them: a candidate that holds no program is one format_error verdict naming its
// file and line, and every other candidate is still judged (issue 43, item 2).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/subprocess.h"
#include "eval/scratch_dir.h"
#include "eval/verdict_table.h"
#include "shared_test_cache.h"

namespace crl::eval {
namespace {

const std::string kFixtures = std::string(CRL_TEST_DATA_DIR) + "/eval";
const std::string kCache = crl::testing::shared_test_cache_dir();
const std::string kRelu = "// crl:host\nat::Tensor forward(const at::Tensor& x) { return at::relu(x); }\n";

CommandResult crl(std::vector<std::string> args) {
  args.insert(args.begin(), CRL_EXE);
  CommandOptions options;
  options.env["CRL_WORKER"] = CRL_WORKER_EXE;
  return run_command(args, options);
}

std::vector<std::string> eval_args(std::vector<std::string> args) {
  std::vector<std::string> argv = {"eval", "--suite", kFixtures + "/suite", "--backend", "cpu", "--trials", "2", "--no-timing",
                                   "--cache-dir", kCache};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

nlohmann::json json_of(const std::string& output) {
  const auto begin = output.find_first_of("[{");
  EXPECT_NE(begin, std::string::npos) << output;
  return nlohmann::json::parse(output.substr(begin));
}

std::string line(const std::string& id, const std::string& field, const std::string& text) {
  return nlohmann::json{{"task", "level1/019_relu"}, {"id", id}, {field, text}}.dump() + "\n";
}

// Raw model output: prose without a block, a good program, a block whose marker is not one of
// crl's, a completion cut at the token limit (its block not closed).
std::string mixed_jsonl() {
  return line("prose", "completion", "I would write a kernel, but here is only prose.") + line("good", "program", kRelu) +
         line("marker", "program", "// crl:kernel\nat::Tensor forward(const at::Tensor& x) { return x; }\n") +
         line("cut", "completion", "Plan: relu.\n```\n// crl:host\nat::Tensor forward(");
}

TEST(JudgeManyCli, EvalOfAJsonlJudgesEveryLineAndNamesTheBadOnes) {
  ScratchDir dir("crl_judge_many_test_");
  const std::string jsonl = dir.file("mixed.jsonl");
  std::ofstream(jsonl) << mixed_jsonl();
  const std::string h5 = dir.file("verdicts.h5");
  const auto r = crl(eval_args({"--json", "--h5", h5, jsonl}));
  ASSERT_EQ(r.exit_code, 1) << r.output;  // judged, and some verdicts are not ok: not bad input (3)
  const auto j = json_of(r.output);
  ASSERT_EQ(j.size(), 4u) << r.output;
  EXPECT_EQ(j[0]["candidate"], "prose");
  EXPECT_EQ(j[0]["status"], "format_error");
  EXPECT_NE(j[0]["message"].get<std::string>().find(jsonl + ":1: the completion has no fenced code block"), std::string::npos)
      << j[0]["message"];
  EXPECT_EQ(j[1]["candidate"], "good");
  EXPECT_EQ(j[1]["status"], "ok") << "the line after a bad one is judged";
  EXPECT_EQ(j[2]["status"], "format_error");
  EXPECT_NE(j[2]["message"].get<std::string>().find(jsonl + ":3:1: expected a section marker"), std::string::npos)
      << j[2]["message"];
  EXPECT_NE(j[2]["message"].get<std::string>().find("'// crl:kernel'"), std::string::npos) << j[2]["message"];
  EXPECT_EQ(j[3]["status"], "format_error");
  EXPECT_NE(j[3]["message"].get<std::string>().find(jsonl + ":4: the completion's last code block is not closed"),
            std::string::npos)
      << j[3]["message"];
  // The results file holds all four in order, each with the text it was given.
  const results::ResultsReader reader(h5);
  const auto verdicts = read_verdicts(reader);
  ASSERT_EQ(verdicts.size(), 4u);
  EXPECT_EQ(verdicts[0].status, VerdictStatus::kFormatError);
  EXPECT_EQ(verdicts[1].status, VerdictStatus::kOk);
  EXPECT_EQ(reader.text("verdict_program", 0).value_or(""), "I would write a kernel, but here is only prose.");
  EXPECT_NE(reader.text("verdict_program", 2).value_or("").find("// crl:kernel"), std::string::npos);
  // --resume counts a format_error as a verdict: nothing is judged again (and nothing judged is exit 0).
  const auto again = crl(eval_args({"--h5", h5, "--resume", jsonl}));
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("holds verdicts of 4 of the 4 candidates; judging the other 0"), std::string::npos)
      << again.output;
  EXPECT_EQ(read_verdicts(results::ResultsReader(h5)).size(), 4u);
}

TEST(JudgeManyCli, EvalOfAFolderJudgesTheFilesBesideOneThatDoesNotParse) {
  ScratchDir dir("crl_judge_many_test_");
  const std::filesystem::path task = std::filesystem::path(dir.file("cands")) / "level1" / "019_relu";
  std::filesystem::create_directories(task);
  std::ofstream(task / "a_bad.crl") << "// a comment is fine\nint stray;\n// crl:host\n" << kRelu.substr(12);
  std::ofstream(task / "b_good.crl") << kRelu;
  const auto r = crl(eval_args({"--json", dir.file("cands")}));
  ASSERT_EQ(r.exit_code, 1) << r.output;
  const auto j = json_of(r.output);
  ASSERT_EQ(j.size(), 2u) << r.output;
  EXPECT_EQ(j[0]["candidate"], "level1/019_relu/a_bad.crl");
  EXPECT_EQ(j[0]["status"], "format_error");
  // The parser's message names the file and the line at fault (line 2: code before any marker).
  EXPECT_NE(j[0]["message"].get<std::string>().find((task / "a_bad.crl").string() + ":2:"), std::string::npos) << j[0]["message"];
  EXPECT_EQ(j[1]["status"], "ok");
}

// What stays bad input (exit 3, nothing judged): the structure a script wrote, a task the suite lacks.
TEST(JudgeManyCli, AMalformedJsonLineOrAnUnknownTaskIsStillBadInput) {
  ScratchDir dir("crl_judge_many_test_");
  const std::string not_json = dir.file("not_json.jsonl"), no_task = dir.file("no_task.jsonl"), unknown = dir.file("unknown.jsonl");
  std::ofstream(not_json) << line("good", "program", kRelu) << "{\"task\": \"level1/019_relu\", \"program\": \n";
  std::ofstream(no_task) << line("good", "program", kRelu) << nlohmann::json{{"program", kRelu}}.dump() << "\n";
  std::ofstream(unknown) << line("good", "program", kRelu)
                         << nlohmann::json{{"task", "level1/999_nothing"}, {"program", kRelu}}.dump() << "\n";
  for (const auto& [path, says] : {std::pair{not_json, ":2"}, std::pair{no_task, ":2: field 'task'"},
                                   std::pair{unknown, "level1/999_nothing"}}) {
    const auto r = crl(eval_args({path}));
    EXPECT_EQ(r.exit_code, 3) << path << ": " << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
  }
}

// crl data validate exists to filter raw model output: a line without a program is reported and
// not kept, the good ones are kept.
TEST(JudgeManyCli, DataValidateKeepsTheGoodLinesBesideOnesWithoutAProgram) {
  ScratchDir dir("crl_judge_many_test_");
  const std::string jsonl = dir.file("raw.jsonl"), kept = dir.file("kept.jsonl");
  std::ofstream(jsonl) << mixed_jsonl();
  const auto r = crl({"data", "validate", jsonl, "--out", kept, "--suite", kFixtures + "/suite", "--backend", "cpu", "--trials",
                      "2", "--time-budget", "0.5", "--max-relative-ci", "10", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r.output);
  EXPECT_EQ(j["total"], 4);
  EXPECT_EQ(j["kept"], 1);
  ASSERT_EQ(j["lines"].size(), 4u);
  EXPECT_EQ(j["lines"][0]["status"], "format_error");
  EXPECT_NE(j["lines"][0]["message"].get<std::string>().find(jsonl + ":1:"), std::string::npos) << j["lines"][0];
  EXPECT_EQ(j["lines"][1]["status"], "ok");
  EXPECT_TRUE(j["lines"][1]["kept"].get<bool>());
  std::ifstream in(kept);
  std::string first, second;
  ASSERT_TRUE(std::getline(in, first));
  EXPECT_EQ(nlohmann::json::parse(first)["id"], "good");
  EXPECT_FALSE(std::getline(in, second)) << "only the good line is kept";
  // The human form names each line without a program under the table.
  const auto human = crl({"data", "validate", jsonl, "--out", kept, "--suite", kFixtures + "/suite", "--backend", "cpu",
                          "--trials", "2", "--time-budget", "0.5", "--max-relative-ci", "10"});
  EXPECT_EQ(human.exit_code, 0) << human.output;
  EXPECT_NE(human.output.find("format_error: " + jsonl + ":4: the completion's last code block is not closed"), std::string::npos)
      << human.output;
  EXPECT_NE(human.output.find("kept 1 of 4 programs"), std::string::npos) << human.output;
  // --h5: every verdict in a results file as it is made (a GPU call cut short keeps what it judged);
  // an existing file is refused, not appended to twice.
  const std::string h5 = dir.file("verdicts.h5");
  const auto with_file = crl({"data", "validate", jsonl, "--out", kept, "--suite", kFixtures + "/suite", "--backend", "cpu",
                              "--trials", "2", "--time-budget", "0.5", "--max-relative-ci", "10", "--h5", h5});
  ASSERT_EQ(with_file.exit_code, 0) << with_file.output;
  const auto rows = eval::read_verdicts(results::ResultsReader(h5));
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].status_text(), "format_error");
  EXPECT_EQ(rows[1].status_text(), "ok");
  const auto again = crl({"data", "validate", jsonl, "--out", kept, "--suite", kFixtures + "/suite", "--backend", "cpu", "--h5", h5});
  EXPECT_EQ(again.exit_code, 3) << again.output;
  EXPECT_NE(again.output.find("the results file exists"), std::string::npos) << again.output;
}

// CUDA-L1's release layout: rows of {level_id, task_id (KernelBench's problem), custom_code}; a row
// without code is counted, the others judged as KernelBench-format programs and the correct kept.
TEST(JudgeManyCli, DataImportJudgesCudaL1sRowsAsKernelBenchPrograms) {
  ScratchDir dir("crl_judge_many_test_");
  const std::string release = dir.file("h100.json"), kept = dir.file("kept.jsonl");
  const std::string good = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n";
  const std::string wrong = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.abs(x)\n";
  std::ofstream(release) << nlohmann::json{{"level_id", 1}, {"task_id", 19}, {"custom_code", good}, {"score_default", 1.1}}.dump() << "\n"
                         << nlohmann::json{{"level_id", 1}, {"task_id", 20}, {"custom_code", nullptr}}.dump() << "\n"
                         << nlohmann::json{{"level_id", 1}, {"task_id", 22}, {"custom_code", "None"}}.dump() << "\n"
                         << nlohmann::json{{"level_id", 1}, {"task_id", 21}, {"custom_code", wrong}}.dump() << "\n";
  const auto r = crl({"data", "import", release, "--out", kept, "--suite", std::string(CRL_SOURCE_DIR) + "/jobs/suite", "--backend",
                      "cpu", "--trials", "2", "--time-budget", "0.5", "--max-relative-ci", "10", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r.output);
  EXPECT_EQ(j["total"], 2);
  EXPECT_EQ(j["without_code"], 2);
  EXPECT_EQ(j["kept"], 1);
  ASSERT_EQ(j["lines"].size(), 2u);
  EXPECT_EQ(j["lines"][0]["task"], "level1/019_relu");
  EXPECT_EQ(j["lines"][0]["format"], "kernelbench");
  EXPECT_EQ(j["lines"][0]["status"], "ok") << j["lines"][0];
  EXPECT_EQ(j["lines"][1]["task"], "level1/021_sigmoid");
  EXPECT_EQ(j["lines"][1]["status"], "mismatch") << j["lines"][1];
  std::ifstream in(kept);
  std::string first;
  ASSERT_TRUE(std::getline(in, first));
  const auto line = nlohmann::json::parse(first);
  EXPECT_EQ(line["format"], "kernelbench");
  EXPECT_EQ(line["id"], "h100.json:level1/019_relu");
  EXPECT_NE(line["completion"].get<std::string>().find("```python\nimport torch"), std::string::npos) << line;
  // A row of neither layout, or of a task the suite lacks, is bad input before anything is judged.
  std::ofstream(release) << nlohmann::json{{"level_id", 9}, {"task_id", 1}, {"custom_code", good}}.dump() << "\n";
  const auto unknown = crl({"data", "import", release, "--out", kept, "--suite", std::string(CRL_SOURCE_DIR) + "/jobs/suite", "--backend", "cpu"});
  EXPECT_EQ(unknown.exit_code, 3) << unknown.output;
  EXPECT_NE(unknown.output.find(release + ":1: the suite has no task level9/001_*"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace crl::eval
