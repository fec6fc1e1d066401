// The job's part of a checkpoint: user_state, the in-flight step, generator states, retention (run_state.h).
#include "rl/run_state.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <algorithm>
#include <system_error>

#include "core/error.h"
#include "policy/checkpoint.h"

namespace crl::rl {

namespace fs = std::filesystem;

nlohmann::json user_state_json(const RunState& state, const nlohmann::json& job_config) {
  nlohmann::json user = {{"job_config", job_config},
                         {"stage", state.stage},
                         {"stage_steps", state.stage_steps},
                         {"stage_done", state.stage_done},
                         {"job_step", state.job_step},
                         {"policy_version", state.policy_version},
                         {"normalizer", state.normalizer},
                         {"rows", {{"steps", state.steps_rows}, {"rollouts", state.rollouts_rows}, {"validation", state.validation_rows}}},
                         {"restart", state.restart},
                         {"stage_start", state.stage_start}};
  if (state.in_flight) {
    const InFlightStep& f = *state.in_flight;
    user["in_flight"] = {{"job_step", f.job_step}, {"local_step", f.local_step}, {"plan", f.plan}, {"trainers", f.trainers}};
  }
  return user;
}

ResumePoint ResumePoint::from_user_state(const std::string& dir, const nlohmann::json& user_state) {
  const std::string origin = (fs::path(dir) / "trainer_state.json").string();
  try {
    ResumePoint r;
    r.dir = dir;
    RunState& s = r.state;
    s.stage = user_state.at("stage").get<size_t>();
    s.stage_steps = user_state.at("stage_steps").get<int64_t>();
    s.stage_done = user_state.at("stage_done").get<bool>();
    s.job_step = user_state.at("job_step").get<int64_t>();
    s.policy_version = user_state.at("policy_version").get<int64_t>();
    s.normalizer = user_state.at("normalizer");
    s.steps_rows = user_state.at("rows").at("steps").get<int64_t>();
    s.rollouts_rows = user_state.at("rows").at("rollouts").get<int64_t>();
    // Absent from checkpoints written before held-out validation: no /validation row came before them.
    const nlohmann::json& rows = user_state.at("rows");
    s.validation_rows = rows.contains("validation") ? rows.at("validation").get<int64_t>() : 0;
    s.restart = user_state.at("restart").get<int64_t>();
    // Absent from checkpoints written before the job recorded them: none in flight, no stage start.
    r.in_flight = user_state.contains("in_flight") ? user_state.at("in_flight") : nlohmann::json();
    s.stage_start = user_state.contains("stage_start") ? user_state.at("stage_start").get<std::string>() : std::string();
    if (s.stage_steps < 0 || s.job_step < 0 || s.steps_rows < 0 || s.rollouts_rows < 0 || s.validation_rows < 0) throw InputError("negative counts");
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: user_state is not a crl run's: {}", origin, e.what()));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: user_state is not a crl run's: {}", origin, e.what()));
  }
}

std::string in_flight_share_text(const GeneratedStep& step) {
  nlohmann::json rollouts = nlohmann::json::array();
  for (const RolloutRecord& r : step.mine) {
    rollouts.push_back({{"group", r.group}, {"sample", r.sample}, {"tokens", r.tokens}, {"text", r.completion}, {"logprobs", r.logp}});
  }
  return nlohmann::json{{"policy_version", step.policy_version}, {"seconds", step.seconds}, {"rollouts", rollouts}}.dump();
}

namespace {

RolloutRecord in_flight_rollout(const nlohmann::json& r, const StageConfig& stage) {
  RolloutRecord rollout;
  rollout.group = r.at("group").get<int64_t>();
  rollout.sample = r.at("sample").get<int64_t>();
  rollout.tokens = r.at("tokens").get<std::vector<int64_t>>();
  rollout.completion = r.at("text").get<std::string>();
  rollout.logp = r.at("logprobs").get<std::vector<float>>();
  rollout.completion_tokens = static_cast<int64_t>(rollout.tokens.size());
  if (rollout.group < 0 || rollout.group >= stage.batch || rollout.sample < 0 || rollout.sample >= stage.group ||
      (!rollout.logp.empty() && rollout.logp.size() != rollout.tokens.size())) {
    throw InputError(fmt::format("in-flight rollout (group {}, sample {}) does not fit the stage", rollout.group, rollout.sample));
  }
  return rollout;
}

}  // namespace

GeneratedStep in_flight_share(const ResumePoint& resume, const StageConfig& stage, int trainer_rank, int trainers) {
  const std::string origin = resume.dir + "/trainer_state.json";
  try {
    const nlohmann::json& f = resume.in_flight;
    GeneratedStep out;
    out.plan.job_step = f.at("job_step").get<int64_t>();
    out.local_step = f.at("local_step").get<int64_t>();
    if (out.plan.job_step != resume.state.job_step || out.local_step != resume.state.stage_steps) {
      throw InputError(fmt::format("its in-flight step ({}, stage step {}) is not the next step ({}, stage step {})",
                                   out.plan.job_step, out.local_step, resume.state.job_step, resume.state.stage_steps));
    }
    const nlohmann::json& plan = f.at("plan");
    if (!plan.is_array() || static_cast<int64_t>(plan.size()) != stage.batch) throw InputError("its in-flight plan has the wrong size");
    out.plan.groups = plan.get<std::vector<PlannedGroup>>();
    const nlohmann::json& shares = f.at("trainers");
    if (!shares.is_array() || static_cast<int>(shares.size()) != trainers) {
      throw InputError(fmt::format("its in-flight step holds {} trainers' rollouts; this run has {} trainers", shares.size(), trainers));
    }
    const nlohmann::json share = nlohmann::json::parse(shares.at(static_cast<size_t>(trainer_rank)).get<std::string>());
    out.policy_version = share.at("policy_version").get<int64_t>();
    out.seconds = share.at("seconds").get<double>();
    for (const auto& r : share.at("rollouts")) out.mine.push_back(in_flight_rollout(r, stage));
    out.finished = std::chrono::steady_clock::now();
    return out;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: the in-flight step is unreadable: {}", origin, e.what()));
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", origin, e.what()));
  }
}

std::string generator_states_cbor(const policy::NamedTensors& states) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, state] : states) {
    const torch::Tensor bytes = state.to(torch::kCPU).contiguous();
    if (bytes.scalar_type() != torch::kUInt8) throw Error(fmt::format("generator state {} is not bytes", name));
    const auto* data = bytes.data_ptr<uint8_t>();
    list.push_back({{"name", name}, {"state", nlohmann::json::binary(std::vector<uint8_t>(data, data + bytes.numel()))}});
  }
  const std::vector<uint8_t> cbor = nlohmann::json::to_cbor(list);
  return std::string(cbor.begin(), cbor.end());
}

policy::NamedTensors generator_states_from_cbor(const std::string& bytes, int trainer_rank) {
  policy::NamedTensors out;
  try {
    for (const auto& item : nlohmann::json::from_cbor(bytes)) {
      const auto& state = item.at("state").get_binary();
      torch::Tensor t = torch::empty({static_cast<int64_t>(state.size())}, torch::kUInt8);
      std::copy(state.begin(), state.end(), t.data_ptr<uint8_t>());
      out.emplace_back(item.at("name").get<std::string>(), t);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("trainer rank {} sent unreadable generator states: {}", trainer_rank, e.what()));
  }
  return out;
}

bool is_stage_end_checkpoint(const fs::path& dir, size_t* stage) {
  if (!fs::exists(dir / "DONE")) return false;
  try {
    const nlohmann::json user = policy::read_checkpoint_state(dir).user_state;
    if (!user.value("stage_done", false)) return false;
    if (stage) *stage = user.at("stage").get<size_t>();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

namespace {

bool is_step_dir(const fs::path& path) { return path.filename().string().rfind("step-", 0) == 0; }

}  // namespace

std::string stage_end_checkpoint(const fs::path& root, size_t stage) {
  std::string newest;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    size_t its_stage = 0;
    if (is_step_dir(entry.path()) && is_stage_end_checkpoint(entry.path(), &its_stage) && its_stage == stage &&
        entry.path().string() > newest) {
      newest = entry.path().string();
    }
  }
  return newest;
}

void prune_checkpoints(const fs::path& root, const fs::path& newest, int64_t keep) {
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.is_directory() && is_step_dir(entry.path())) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return a.filename() > b.filename(); });
  int64_t kept = 0;
  for (const fs::path& d : dirs) {
    if (d != newest && is_stage_end_checkpoint(d)) continue;  // a later stage's KL reference, and the stage's result
    if (d != newest && (kept >= keep || !fs::exists(d / "DONE"))) {
      std::error_code ec;
      fs::remove_all(d, ec);
    } else {
      ++kept;
    }
  }
}

}  // namespace crl::rl
