// `crl doctor [--json]`: what this machine offers and lacks, the command that fixes each gap, and
// what crl can do here with it (each capability with the command that uses it).
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <optional>

#include "apps/crl/commands.h"
#include "core/subprocess.h"
#include "core/text_table.h"
#include "eval/evaluator.h"
#include "eval/scratch_dir.h"
#include "machine/machine_probe.h"
#include "suite/suite.h"

namespace crl::cli {
namespace {

struct Capability {
  std::string name;
  std::string status;  // "ready", "needs ...", "broken: ..."
  std::string how;     // the command that uses it (or what is missing)
};

bool component_ok(const MachineReport& report, const std::string& name) {
  const Component* c = report.find(name);
  return c != nullptr && c->ok;
}

// On a GPU machine: what keeps a candidate's worker from using the GPU under its sandbox (empty:
// nothing). crl-worker --probe-cuda --worker-order applies the sandbox in a worker's order and
// computes on the GPU: the sandbox's rules once kept the H200's CUDA driver from starting in every
// worker, so no GPU program could be judged, and nothing but a GPU machine shows that.
std::string sandboxed_gpu_worker_problem(const std::string& worker) {
  std::optional<eval::ScratchDir> dir;
  try {
    dir.emplace("crl-doctor.");
  } catch (const Error& e) {
    return e.what();
  }
  const CommandResult r = run_command({worker, "--probe-cuda", "--worker-order", "--sandbox", dir->path()},
                                      {.timeout = std::chrono::seconds(120), .max_output = 1 << 16});
  if (r.ok()) return {};
  const auto at = r.output.find("probe-cuda: failed: ");
  std::string why = at != std::string::npos ? r.output.substr(at + 20) : r.output;
  if (const auto end = why.find('\n'); end != std::string::npos) why.resize(end);
  return fmt::format("{} (crl-worker --probe-cuda --worker-order --sandbox DIR{})", why.empty() ? "it failed" : why,
                     r.timed_out ? ": timed out" : "");
}

// What crl can do on this machine, from the probe and from what this build holds.
std::vector<Capability> capabilities(const MachineReport& report) {
  std::vector<Capability> out;
  const bool torch = component_ok(report, "libtorch");
  const bool gpu = !report.gpus.empty() && component_ok(report, "gpu");
  std::string worker;          // crl-worker's path, when found
  std::string worker_missing;  // why crl-worker cannot be found; empty when it can
  try {
    worker = eval::find_worker_executable();
  } catch (const Error& e) {
    worker_missing = e.what();
  }
  const bool have_worker = worker_missing.empty();
  std::string suite_detail;
  size_t tasks = 0;
  try {
    tasks = Suite::load(resolve_suite_dir()).tasks().size();
    suite_detail = fmt::format("{} tasks: crl tasks list, crl tasks check --scale small", tasks);
  } catch (const Error& e) {
    suite_detail = e.what();
  }
  out.push_back({"task suite", tasks > 0 ? "ready" : "missing", suite_detail});
  out.push_back({"evaluate on the CPU", torch && have_worker ? "ready" : "needs libtorch and crl-worker",
                 have_worker ? "crl eval CANDIDATE.crl --task ID --backend cpu" : worker_missing});
  const bool gpu_parts = torch && have_worker && gpu && component_ok(report, "nvcc");
  const std::string gpu_problem = gpu_parts ? sandboxed_gpu_worker_problem(worker) : "";
  out.push_back({"evaluate on the GPU",
                 !gpu_parts              ? "needs a GPU and nvcc"
                 : gpu_problem.empty() ? "ready"
                                         : "broken: a sandboxed worker cannot use the GPU",
                 gpu_problem.empty() ? "crl eval CANDIDATE.crl --task ID --backend cuda" : gpu_problem});
  out.push_back({"policy inference", torch ? "ready" : "needs libtorch",
                 "crl init-model, crl generate (Qwen2 / Llama checkpoints)"});
  out.push_back({"training, data parallel", component_ok(report, "mpi") ? "ready" : "needs MPI",
                 gpu && component_ok(report, "nccl") ? "NCCL across GPUs (library: crl::rl_train, crl::dist)"
                                                     : "MPI all-reduce on CPUs; NCCL needs GPUs"});
  out.push_back({"the job (crl run: SFT, self-training, contrastive RL)",
                 torch && have_worker && component_ok(report, "mpi") ? "ready" : "needs libtorch, MPI and crl-worker",
                 "crl run (the built-in default job), or crl run JOB.yaml under mpirun or srun"});
  return out;
}

}  // namespace

void add_doctor_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("doctor", "Show what this machine offers crl (GPUs, CUDA, NCCL, MPI, HDF5, LibTorch) "
                                           "and what crl can do here");
  static bool json = false;
  cmd->add_flag("--json", json, "Print the report as JSON");
  cmd->callback([&exit_code] {
    const MachineReport report = probe_machine();
    const std::vector<Capability> can = capabilities(report);
    if (json) {
      nlohmann::json j = report.to_json();
      j["capabilities"] = nlohmann::json::array();
      for (const auto& c : can) j["capabilities"].push_back({{"name", c.name}, {"status", c.status}, {"how", c.how}});
      std::cout << j.dump(2) << "\n";
      exit_code = kExitOk;
      return;
    }
    std::cout << fmt::format("crl doctor on {}\n\n", report.host);
    if (report.gpus.empty()) {
      std::cout << "GPUs: none\n\n";
    } else {
      TextTable gpus({"gpu", "name", "memory", "compute capability", "SMs"});
      for (const auto& g : report.gpus) {
        gpus.add_row({std::to_string(g.index), g.name, fmt::format("{:.1f} GiB", g.memory_gib),
                      fmt::format("{}.{}", g.cc_major, g.cc_minor), std::to_string(g.multiprocessors)});
      }
      std::cout << gpus.str() << "\n";
    }
    TextTable table({"component", "status", "version", "detail"});
    for (const auto& c : report.components) {
      table.add_row({c.name, c.ok ? "ok" : "missing", c.version, c.detail});
    }
    std::cout << table.str();
    bool any_fix = false;
    for (const auto& c : report.components) {
      if (c.ok || c.fix.empty()) continue;
      if (!any_fix) std::cout << "\nTo fix:\n";
      any_fix = true;
      std::cout << fmt::format("  {}: {}\n", c.name, c.fix);
    }
    TextTable what({"what crl can do here", "status", "how"});
    for (const auto& c : can) what.add_row({c.name, c.status, c.how});
    std::cout << "\n" << what.str();
    exit_code = kExitOk;
  });
}

}  // namespace crl::cli
