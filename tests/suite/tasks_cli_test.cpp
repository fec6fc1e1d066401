// `crl tasks` end to end: list and show, and the CI gates: every reference of levels 1-3 passes
// `crl tasks check --scale small --level N` on the CPU (compiled in parallel, cached).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "core/subprocess.h"
#include "shared_test_cache.h"

namespace crl {
namespace {

const std::string kFixtures = std::string(CRL_TEST_DATA_DIR) + "/suite";

// The JSON document in a command's merged output (log lines go to stderr, before or after it).
nlohmann::json json_of(const std::string& output) {
  const auto begin = output.find_first_of("[{");
  const auto end = output.find_last_of("]}");
  if (begin == std::string::npos || end == std::string::npos) throw std::runtime_error("no JSON in:\n" + output);
  std::string text = output.substr(begin, end - begin + 1);
  // Log lines start with "[HH:MM:SS": drop any that landed inside the captured range.
  std::string clean;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(pos, nl - pos);
    if (!(line.size() > 9 && line[0] == '[' && line[3] == ':' && line[6] == ':')) clean += line + "\n";
    pos = nl + 1;
  }
  return nlohmann::json::parse(clean);
}

CommandOptions with_suite_env() {
  CommandOptions o;
  o.timeout = std::chrono::minutes(15);
  o.env["CRL_CACHE_DIR"] = crl::testing::shared_test_cache_dir();
  return o;
}

TEST(TasksCli, ListLevel1JsonHasHundredTasks) {
  const auto r = run_command({CRL_EXE, "tasks", "list", "--level", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r.output);
  ASSERT_EQ(j.size(), 100u);
  EXPECT_EQ(j[18]["id"], "level1/019_relu");
  EXPECT_EQ(j[18]["scales"]["full"]["variables"]["dim"], 393216);
}

TEST(TasksCli, ShowPrintsMetadataAndTheProgramText) {
  const auto r = run_command({CRL_EXE, "tasks", "show", "level1/012_diag_matmul", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r.output);
  EXPECT_EQ(j["category"], "matmul");
  EXPECT_NE(j["program"].get<std::string>().find("// crl:host"), std::string::npos);
  const auto text = run_command({CRL_EXE, "tasks", "show", "level1/012_diag_matmul"});
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("A.unsqueeze(1) * B"), std::string::npos) << text.output;
}

// --format kernelbench shows the task's module from a KernelBench checkout (here a folder of the
// test's own, laid out as KernelBench's) with the arguments the judge builds ModelNew with per scale;
// without a checkout it says which flag gives one.
TEST(TasksCli, ShowFormatKernelBenchPrintsTheCheckoutsModuleAndTheConstructorsArguments) {
  const auto checkout = std::filesystem::temp_directory_path() / ("crl_tasks_show_kb_" + std::to_string(::getpid()));
  std::filesystem::create_directories(checkout / "KernelBench" / "level1");
  const std::string module = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)  # the test's module\n";
  std::ofstream(checkout / "KernelBench" / "level1" / "19_ReLU.py") << module;
  const auto r = run_command({CRL_EXE, "tasks", "show", "level1/019_relu", "--format", "kernelbench", "--kernelbench", checkout.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = json_of(r.output);
  EXPECT_EQ(j["format"], "kernelbench");
  EXPECT_EQ(j["program"], module);
  EXPECT_EQ(j["init_args"]["small"], "[]") << j.dump();
  const auto conv = run_command({CRL_EXE, "tasks", "show", "level1/019_relu", "--format", "kernelbench", "--kernelbench", checkout.string()});
  ASSERT_EQ(conv.exit_code, 0) << conv.output;
  EXPECT_NE(conv.output.find("# the test's module"), std::string::npos) << conv.output;
  EXPECT_NE(conv.output.find("ModelNew's arguments at scale full: []"), std::string::npos) << conv.output;
  // A task whose constructor takes arguments: they follow the scale (KernelBench's module hard-codes the full one).
  std::filesystem::create_directories(checkout / "KernelBench" / "level2");
  std::ofstream(checkout / "KernelBench" / "level2" / "1_Conv2D_ReLU_BiasAdd.py") << module;
  const auto args = run_command({CRL_EXE, "tasks", "show", "level2/001_conv2d_relu_bias_add", "--format", "kernelbench", "--kernelbench", checkout.string(), "--json"});
  ASSERT_EQ(args.exit_code, 0) << args.output;
  const auto by_scale = json_of(args.output)["init_args"];
  EXPECT_EQ(by_scale["full"].get<std::string>().substr(0, 1), "[") << by_scale.dump();
  EXPECT_NE(by_scale["full"], by_scale["small"]) << by_scale.dump();
  // A task whose module the checkout lacks, and no checkout at all: exit 3, naming what is missing.
  const auto missing = run_command({CRL_EXE, "tasks", "show", "level1/001_square_matmul", "--format", "kernelbench", "--kernelbench", checkout.string()});
  EXPECT_EQ(missing.exit_code, 3) << missing.output;
  EXPECT_NE(missing.output.find("no KernelBench module for level1/001_square_matmul"), std::string::npos) << missing.output;
  CommandOptions no_env;
  no_env.env["CRL_KERNELBENCH_DIR"] = "";
  const auto none = run_command({CRL_EXE, "tasks", "show", "level1/019_relu", "--format", "kernelbench"}, no_env);
  EXPECT_EQ(none.exit_code, 3) << none.output;
  EXPECT_NE(none.output.find("--kernelbench DIR"), std::string::npos) << none.output;
  std::filesystem::remove_all(checkout);
}

TEST(TasksCli, UnknownTaskIsAnInputError) {
  const auto r = run_command({CRL_EXE, "tasks", "show", "level1/000_nothing"});
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_NE(r.output.find("no task 'level1/000_nothing'"), std::string::npos) << r.output;
}

TEST(TasksCli, CheckOfADegenerateFixtureExitsOne) {
  const auto r = run_command({CRL_EXE, "tasks", "check", "--suite-dir", kFixtures + "/degenerate", "--backend", "cpu",
                              "--task", "level1/019_relu_on_rand"},
                             with_suite_env());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("degenerate"), std::string::npos) << r.output;
}

// A check cut short keeps what it found (--out is rewritten after every task), and --resume checks
// only the tasks the file holds no ok result of, refusing a file that was measured another way.
TEST(TasksCli, CheckResumeKeepsTheResultsOfAnEarlierCheckAndChecksTheRest) {
  const std::string out = (std::filesystem::path(CRL_BINARY_DIR) / "tasks_check_resume.json").string();
  std::filesystem::remove(out);
  const std::vector<std::string> check = {CRL_EXE, "tasks", "check", "--backend", "cpu", "--time-budget", "0",
                                          "--task", "level1/019_relu", "--task", "level1/012_diag_matmul",
                                          "--out", out};
  const auto first = run_command(check, with_suite_env());
  ASSERT_EQ(first.exit_code, 0) << first.output;
  nlohmann::json j;
  {
    std::ifstream f(out);
    j = nlohmann::json::parse(f);
  }
  ASSERT_EQ(j["tasks"], 2);
  EXPECT_TRUE(j["complete"].get<bool>());
  // As if the check had been cut after its first task: one result kept, marked so we can tell it
  // was not checked again; a failed one is checked again (the failure may have been crl's).
  ASSERT_EQ(j["results"][0]["id"], "level1/019_relu");  // in the order of --task
  j["results"][0]["message"] = "kept from the first check";
  j["results"][1]["status"] = "timing_error";
  j["complete"] = false;
  std::ofstream(out) << j.dump(2);

  std::vector<std::string> resume = check;
  resume.push_back("--resume");
  const auto second = run_command(resume, with_suite_env());
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("holds ok results of 1 of the 2 selected tasks; checking the other 1"), std::string::npos)
      << second.output;
  std::ifstream f(out);
  const auto merged = nlohmann::json::parse(f);
  ASSERT_EQ(merged["tasks"], 2);
  EXPECT_EQ(merged["failures"], 0);
  EXPECT_TRUE(merged["complete"].get<bool>());
  EXPECT_EQ(merged["results"][0]["message"], "kept from the first check");
  EXPECT_EQ(merged["results"][1]["id"], "level1/012_diag_matmul");
  EXPECT_EQ(merged["results"][1]["status"], "ok");

  // Another scale is another measurement: refused, naming the key, and the file is left as it was.
  std::vector<std::string> other_scale = resume;
  other_scale.insert(other_scale.begin() + 3, {"--scale", "full"});
  const auto refused = run_command(other_scale, with_suite_env());
  EXPECT_EQ(refused.exit_code, 3) << refused.output;
  EXPECT_NE(refused.output.find("was checked with scale \"small\", this check asks for \"full\""), std::string::npos)
      << refused.output;
  std::ifstream again(out);
  EXPECT_EQ(nlohmann::json::parse(again), merged);

  // A file that is not a check's report: an input error naming it, the file left as it was.
  const std::string other = (std::filesystem::path(CRL_BINARY_DIR) / "tasks_check_resume_not_a_report.json").string();
  std::ofstream(other) << "{\"scale\": \"small\"}";
  std::vector<std::string> not_a_report = resume;
  not_a_report[not_a_report.size() - 2] = other;  // the value of --out
  const auto broken = run_command(not_a_report, with_suite_env());
  EXPECT_EQ(broken.exit_code, 3) << broken.output;
  EXPECT_NE(broken.output.find(other + " is not a `crl tasks check` report"), std::string::npos) << broken.output;
  std::ifstream left(other);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(left), {}), "{\"scale\": \"small\"}");
}

// The level's task ids (its .crl references), sorted.
std::vector<std::string> level_task_ids(int level) {
  std::vector<std::string> ids;
  const std::string dir = std::string(CRL_SOURCE_DIR) + "/jobs/suite/level" + std::to_string(level);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() == ".crl") ids.push_back("level" + std::to_string(level) + "/" + entry.path().stem().string());
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// The task ids of a level whose references a check covers: every one with CRL_TEST_EVERY_REFERENCE=1
// (ctest's suite_every_reference, label slow), else every fourth in id order, so each category
// of the level is still reached in CI while the cold compile of 250 references (~345 s of CI's
// test time, where every compile is a cache miss) is a quarter of it.
std::vector<std::string> checked_tasks(int level) {
  const std::vector<std::string> ids = level_task_ids(level);
  const char* every = std::getenv("CRL_TEST_EVERY_REFERENCE");
  if (every != nullptr && std::string(every) == "1") return ids;
  std::vector<std::string> sample;
  for (size_t i = 0; i < ids.size(); i += 4) sample.push_back(ids[i]);
  return sample;
}

// Runs `crl tasks check --scale small --backend cpu` on the level's checked tasks (the whole level
// holds `level_tasks`) and expects every one ok.
void expect_small_check_passes(int level, size_t level_tasks) {
  ASSERT_EQ(level_task_ids(level).size(), level_tasks);
  const std::vector<std::string> tasks = checked_tasks(level);
  ASSERT_GE(tasks.size(), level_tasks / 4);
  const std::string out =
      (std::filesystem::path(CRL_BINARY_DIR) / ("tasks_check_small_level" + std::to_string(level) + ".json")).string();
  std::vector<std::string> argv = {CRL_EXE, "tasks", "check", "--scale", "small", "--backend", "cpu", "--time-budget", "0", "--out", out};
  for (const auto& t : tasks) {
    argv.push_back("--task");
    argv.push_back(t);
  }
  const auto r = run_command(argv, with_suite_env());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::ifstream f(out);
  ASSERT_TRUE(f.good()) << out;
  const auto j = nlohmann::json::parse(f);
  EXPECT_EQ(j["tasks"], tasks.size());
  EXPECT_EQ(j["failures"], 0);
  for (const auto& t : j["results"]) {
    EXPECT_EQ(t["status"], "ok") << t["id"] << ": " << t["message"];
    EXPECT_TRUE(t["bitwise_deterministic"].get<bool>()) << t["id"] << ": the CPU backend is deterministic";
  }
}

// The CI gates: the references of each level at small scale on the CPU (a sample; all of them
// under the label slow).
TEST(TasksCli, CheckSmallLevel1PassesForItsCheckedReferences) {
  expect_small_check_passes(1, 100);
  // A second check finds every compile in the cache.
  const std::vector<std::string> tasks = checked_tasks(1);
  const auto again = run_command({CRL_EXE, "tasks", "check", "--scale", "small", "--task", tasks[0], "--task", tasks[1],
                                  "--task", tasks[2], "--backend", "cpu", "--time-budget", "0", "--json"},
                                 with_suite_env());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const auto cached = json_of(again.output);
  ASSERT_EQ(cached["tasks"], 3);
  for (const auto& t : cached["results"]) EXPECT_TRUE(t["cache_hit"].get<bool>()) << t["id"];
}

TEST(TasksCli, CheckSmallLevel2PassesForItsCheckedReferences) { expect_small_check_passes(2, 100); }

TEST(TasksCli, CheckSmallLevel3PassesForItsCheckedReferences) { expect_small_check_passes(3, 50); }

}  // namespace
}  // namespace crl
