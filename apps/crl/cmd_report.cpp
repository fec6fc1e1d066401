// `crl report`: the literature's tables and plots from results files, as a page people read.
//   crl report run.h5 [other.h5 ...] --out DIR [--json]
// Runs tools/analysis/crl_report.py with the analysis venv's Python (tools/setup.sh makes it), giving
// it the suite's task metadata (flops and bytes per scale, reference paths); docs/report.md.
// Exit codes: the script's (0 written, 3 an input it cannot read), 2 bad arguments, 4 the analysis
// Python or its packages missing (the message says which command installs them) or a report failure.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "apps/crl/commands.h"
#include "core/error.h"
#include "core/subprocess.h"
#include "suite/suite.h"

namespace crl::cli {
namespace {

namespace fs = std::filesystem;

struct ReportOptions {
  std::vector<std::string> files;
  std::string out;
  bool json = false;
  std::string suite_dir;
  std::string title;
  double peak_gbps = 0;
  double peak_gflops = 0;
  bool stable = false;
  std::string md;
};

// The venv tools/setup.sh makes: $CRL_HOME/venv, else ~/.local/share/crl/venv (as CMake finds LibTorch).
fs::path analysis_python() {
  const char* crl_home = std::getenv("CRL_HOME");
  const char* home = std::getenv("HOME");
  const fs::path root = crl_home != nullptr && *crl_home != '\0' ? fs::path(crl_home)
                        : home != nullptr                       ? fs::path(home) / ".local/share/crl"
                                                                : fs::path("/nonexistent");
  return root / "venv/bin/python3";
}

// Where the report's scripts live: $CRL_ANALYSIS_DIR, else the source tree's tools/analysis.
fs::path analysis_dir() {
  if (const char* env = std::getenv("CRL_ANALYSIS_DIR"); env != nullptr && *env != '\0') return env;
  return CRL_ANALYSIS_DIR;
}

constexpr const char* kInstallHint =
    "run `tools/setup.sh` from the crl source tree (`CRL_SKIP_BUILD=1 tools/setup.sh` installs without building)";

void check_python(const fs::path& python) {
  if (!fs::exists(python)) {
    throw Error(fmt::format("crl report needs the analysis Python at {} (h5py, pandas, matplotlib): {}",
                            python.string(), kInstallHint));
  }
  // find_spec finds the packages without importing them (importing pandas and matplotlib takes seconds).
  const auto probe = run_command({python.string(), "-c",
                                  "import importlib.util, sys; missing = [m for m in ('h5py', 'pandas', 'matplotlib') "
                                  "if importlib.util.find_spec(m) is None]; sys.exit('missing: ' + ', '.join(missing) "
                                  "if missing else 0)"},
                                 {.timeout = std::chrono::seconds(60)});
  if (!probe.ok()) {
    throw Error(fmt::format("crl report: {} lacks h5py, pandas or matplotlib ({}): {}", python.string(),
                            probe.output.substr(probe.output.rfind('\n', probe.output.size() - 2) + 1), kInstallHint));
  }
}

// The suite's task metadata as `crl tasks list --json` prints it, written for the script. Without
// --suite, a suite that cannot be found only costs the roofline and the diffs (a warning says so).
std::string write_task_metadata(const ReportOptions& o, const fs::path& path, std::string& suite_dir) {
  try {
    const Suite suite = Suite::load(resolve_suite_dir(o.suite_dir));
    nlohmann::json tasks = nlohmann::json::array();
    for (const Task& t : suite.tasks()) tasks.push_back(task_metadata_json(t));
    std::ofstream(path) << tasks.dump();
    suite_dir = suite.dir();
    return path.string();
  } catch (const InputError& e) {
    if (!o.suite_dir.empty()) throw;
    spdlog::warn("crl report: no task suite ({}): the roofline and the diffs against references are left out",
                 e.what());
    return "";
  }
}

// Runs the script with this process's stdout and stderr (its --json and its progress line) and returns
// its exit status; 4 when it died of a signal.
int run_script(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) throw_io_error("cannot start the report script", argv[1]);
  if (pid == 0) {
    execv(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw_io_error("cannot wait for the report script", argv[1]);
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 127) return WEXITSTATUS(status);
  throw Error(fmt::format("crl report: {} {}", argv[1],
                          WIFSIGNALED(status) ? fmt::format("died of signal {}", WTERMSIG(status))
                                              : std::string("could not be started")));
}

int run_report(const ReportOptions& o, const std::string& invocation) {
  const fs::path python = analysis_python();
  check_python(python);
  const fs::path script = analysis_dir() / "crl_report.py";
  if (!fs::exists(script)) {
    throw Error(fmt::format("crl report: no {} (set CRL_ANALYSIS_DIR to the source tree's tools/analysis)",
                            script.string()));
  }
  std::error_code ec;
  fs::create_directories(o.out, ec);
  if (ec) throw IoError(fmt::format("cannot create the report folder {}: {}", o.out, ec.message()), ec.value());
  const fs::path metadata = fs::path(o.out) / fmt::format(".crl-report-tasks-{}.json", getpid());
  std::string suite_dir;
  const std::string tasks_json = write_task_metadata(o, metadata, suite_dir);
  std::vector<std::string> argv = {python.string(), script.string()};
  argv.insert(argv.end(), o.files.begin(), o.files.end());
  argv.insert(argv.end(), {"--out", o.out});
  if (!tasks_json.empty()) argv.insert(argv.end(), {"--tasks-json", tasks_json, "--suite-dir", suite_dir});
  if (!suite_dir.empty()) {  // jobs/examples, beside the suite: the programs an examples JSON names
    argv.insert(argv.end(), {"--examples-dir", (fs::weakly_canonical(suite_dir).parent_path() / "examples").string()});
  }
  if (o.json) argv.push_back("--json");
  if (o.stable) argv.insert(argv.end(), {"--stable", "--invocation", invocation});
  if (!o.md.empty()) argv.insert(argv.end(), {"--md", o.md});
  if (!o.title.empty()) argv.insert(argv.end(), {"--title", o.title});
  if (o.peak_gbps > 0) argv.insert(argv.end(), {"--peak-gbps", fmt::format("{}", o.peak_gbps), "--peak-gflops",
                                                 fmt::format("{}", o.peak_gflops)});
  int code = kExitInternal;
  try {
    code = run_script(argv);
  } catch (...) {
    fs::remove(metadata, ec);
    throw;
  }
  fs::remove(metadata, ec);
  return code;
}

}  // namespace

void add_report_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("report", "Tables and plots from results files: DIR/index.html, summary.md, "
                                           "tasks.csv, summary.json (docs/report.md)");
  static ReportOptions o;
  cmd->add_option("files", o.files, "Results files (.h5), `crl tasks check --out` JSON, examples JSON")
      ->required();
  cmd->add_option("--out", o.out, "The folder to write the report into")->required();
  cmd->add_flag("--json", o.json, "Also print summary.json on stdout");
  cmd->add_option("--suite,--suite-dir", o.suite_dir, "The task suite folder (default: $CRL_SUITE_DIR or the source tree's)");
  cmd->add_option("--title", o.title, "The page's title");
  auto* gbps = cmd->add_option("--peak-gbps", o.peak_gbps, "Peak memory bandwidth (GB/s) for the roofline "
                                                          "(default: known from the GPU's name)")
                   ->check(CLI::PositiveNumber);
  auto* gflops = cmd->add_option("--peak-gflops", o.peak_gflops, "Peak FP32 GFLOP/s for the roofline")
                     ->check(CLI::PositiveNumber);
  gbps->needs(gflops);
  gflops->needs(gbps);
  cmd->add_option("--md", o.md, "Also write the Markdown summary to this file, its plot links relative to it");
  cmd->add_flag("--stable", o.stable, "Leave the time and folders out of the page (committed examples)");
  cmd->callback([&exit_code] {
    std::string invocation = "crl report";  // as the user typed it, for --stable pages (docs/report-example.md)
    for (const auto& f : o.files) invocation += " " + f;
    invocation += " --out " + o.out;
    if (!o.md.empty()) invocation += " --md " + o.md;
    if (!o.title.empty()) invocation += " --title \"" + o.title + "\"";
    invocation += " --stable";
    exit_code = run_report(o, invocation);
  });
}

}  // namespace crl::cli
