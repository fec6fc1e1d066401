// The job's part of a checkpoint (rl/run_state.h): user_state and the in-flight step round trip and
// refuse what does not fit, generator states cross as CBOR, and retention keeps the newest
// finished checkpoints and every stage's end.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"
#include "rl/run_state.h"

namespace crl::rl {
namespace {

namespace fs = std::filesystem;

const nlohmann::json kJob = {{"name", "t"}};

RunState sample_state() {
  RunState s;
  s.stage = 2;
  s.stage_steps = 3;
  s.stage_done = false;
  s.job_step = 11;
  s.policy_version = 9;
  s.normalizer = {{"window", {1.0, 2.0}}};
  s.steps_rows = 11;
  s.rollouts_rows = 48;
  s.restart = 1;
  s.stage_start = "step-00000008";
  return s;
}

StageConfig stage_of(int64_t batch, int64_t group) {
  StageConfig s;
  s.batch = batch;
  s.group = group;
  return s;
}

TEST(RunState, UserStateRoundTrips) {
  const nlohmann::json user = user_state_json(sample_state(), kJob);
  EXPECT_EQ(user.at("job_config"), kJob);
  EXPECT_FALSE(user.contains("in_flight"));
  const ResumePoint r = ResumePoint::from_user_state("/ck/step-00000011", user);
  EXPECT_EQ(r.dir, "/ck/step-00000011");
  EXPECT_EQ(r.state.stage, 2u);
  EXPECT_EQ(r.state.stage_steps, 3);
  EXPECT_FALSE(r.state.stage_done);
  EXPECT_EQ(r.state.job_step, 11);
  EXPECT_EQ(r.state.policy_version, 9);
  EXPECT_EQ(r.state.normalizer, sample_state().normalizer);
  EXPECT_EQ(r.state.steps_rows, 11);
  EXPECT_EQ(r.state.rollouts_rows, 48);
  EXPECT_EQ(r.state.restart, 1);
  EXPECT_EQ(r.state.stage_start, "step-00000008");
  EXPECT_TRUE(r.in_flight.is_null());
}

TEST(RunState, UserStateThatIsNotACrlRunsIsRefusedNamingTheFile) {
  nlohmann::json user = user_state_json(sample_state(), kJob);
  user.erase("policy_version");
  try {
    ResumePoint::from_user_state("/ck/step-1", user);
    FAIL() << "a user_state without policy_version was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("/ck/step-1/trainer_state.json"), std::string::npos) << e.what();
  }
  nlohmann::json negative = user_state_json(sample_state(), kJob);
  negative["rows"]["rollouts"] = -1;
  EXPECT_THROW(ResumePoint::from_user_state("/ck/step-1", negative), InputError);
  nlohmann::json mistyped = user_state_json(sample_state(), kJob);
  mistyped["stage_done"] = "yes";
  EXPECT_THROW(ResumePoint::from_user_state("/ck/step-1", mistyped), InputError);
}

// Trainer 1's share of a 2-group step (G = 2): group 1's two rollouts, one planted (no log-probs).
GeneratedStep trainer_one_share() {
  GeneratedStep g;
  g.plan = {11, {{"a", "prompt a", ""}, {"b", "prompt b", "3"}}};
  g.local_step = 3;
  g.policy_version = 8;
  g.seconds = 1.25;
  RolloutRecord r;
  r.group = 1;
  r.sample = 0;
  r.completion = "text";
  r.tokens = {5, 6};
  r.logp = {-0.5f, -0.25f};
  g.mine.push_back(r);
  r.sample = 1;
  r.logp.clear();
  g.mine.push_back(r);
  return g;
}

// A resume point whose in-flight step holds `share` as trainer 1's (of two).
ResumePoint resume_with(const GeneratedStep& share) {
  RunState state = sample_state();
  state.in_flight = InFlightStep{share.plan.job_step, share.local_step, share.plan.groups, {"{}", in_flight_share_text(share)}};
  return ResumePoint::from_user_state("/ck/step-00000011", user_state_json(state, kJob));
}

TEST(RunState, InFlightStepRoundTripsPerTrainer) {
  const GeneratedStep share = trainer_one_share();
  const GeneratedStep back = in_flight_share(resume_with(share), stage_of(2, 2), 1, 2);
  EXPECT_EQ(back.plan.job_step, 11);
  EXPECT_EQ(back.local_step, 3);
  ASSERT_EQ(back.plan.groups.size(), 2u);
  EXPECT_EQ(back.plan.groups[1].prompt, "prompt b");
  EXPECT_EQ(back.plan.groups[1].exemplar_ids, "3");
  EXPECT_EQ(back.policy_version, 8);
  EXPECT_EQ(back.seconds, 1.25);
  ASSERT_EQ(back.mine.size(), 2u);
  EXPECT_EQ(back.mine[0].tokens, (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(back.mine[0].completion_tokens, 2);
  EXPECT_EQ(back.mine[0].logp, (std::vector<float>{-0.5f, -0.25f}));
  EXPECT_EQ(back.mine[0].completion, "text");
  EXPECT_TRUE(back.mine[1].logp.empty());
  EXPECT_EQ(back.mine[1].sample, 1);
}

TEST(RunState, InFlightStepThatDoesNotFitTheRunIsRefused) {
  const GeneratedStep share = trainer_one_share();
  // Not the next step of the checkpoint.
  GeneratedStep late = share;
  late.plan.job_step = 12;
  EXPECT_THROW(in_flight_share(resume_with(late), stage_of(2, 2), 1, 2), InputError);
  // Another batch, another trainer count, a group beyond the stage's, log-probs that do not match.
  EXPECT_THROW(in_flight_share(resume_with(share), stage_of(3, 2), 1, 2), InputError);
  EXPECT_THROW(in_flight_share(resume_with(share), stage_of(2, 2), 1, 3), InputError);
  GeneratedStep wide = share;
  wide.mine[0].sample = 2;
  EXPECT_THROW(in_flight_share(resume_with(wide), stage_of(2, 2), 1, 2), InputError);
  GeneratedStep uneven = share;
  uneven.mine[0].logp = {-1.0f};
  EXPECT_THROW(in_flight_share(resume_with(uneven), stage_of(2, 2), 1, 2), InputError);
  // Trainer 0's share is not JSON of a share.
  EXPECT_THROW(in_flight_share(resume_with(share), stage_of(2, 2), 0, 2), InputError);
}

TEST(RunState, GeneratorStatesCrossAsCbor) {
  const policy::NamedTensors states = {{"cpu", torch::tensor({1, 2, 250}, torch::kUInt8)}, {"cuda:0", torch::tensor({7}, torch::kUInt8)}};
  const policy::NamedTensors back = generator_states_from_cbor(generator_states_cbor(states), 1);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].first, "cpu");
  EXPECT_TRUE(torch::equal(back[0].second, states[0].second));
  EXPECT_EQ(back[1].first, "cuda:0");
  EXPECT_THROW(generator_states_cbor({{"cpu", torch::tensor({1.0f})}}), Error);
  try {
    generator_states_from_cbor("not cbor", 3);
    FAIL() << "garbage was read as generator states";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("trainer rank 3"), std::string::npos) << e.what();
  }
}

// ROOT/step-N with a trainer_state.json of stage `stage` (a stage's end when `stage_done`), finished
// (DONE) or not.
void make_checkpoint(const fs::path& root, int n, size_t stage, bool stage_done, bool finished = true) {
  const fs::path dir = root / fmt::format("step-{:08d}", n);
  fs::create_directories(dir);
  std::ofstream(dir / "trainer_state.json")
      << nlohmann::json{{"step", n}, {"schedule", nlohmann::json::object()}, {"lora", false},
                        {"user_state", {{"stage", stage}, {"stage_done", stage_done}}}}.dump();
  if (finished) std::ofstream(dir / "DONE") << "hashes\n";
}

fs::path fresh_root(const std::string& name) {
  const fs::path root = fs::temp_directory_path() / ("crl_run_state_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  return root;
}

TEST(RunState, RetentionKeepsTheNewestFinishedAndEveryStageEnd) {
  const fs::path root = fresh_root("prune");
  make_checkpoint(root, 1, 0, false);
  make_checkpoint(root, 2, 0, true);  // stage 0's end
  make_checkpoint(root, 3, 1, false);
  make_checkpoint(root, 4, 1, false);
  make_checkpoint(root, 6, 1, false, /*finished=*/false);
  make_checkpoint(root, 5, 1, false);
  prune_checkpoints(root, root / "step-00000005", 2);
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(root)) left.insert(e.path().filename().string());
  EXPECT_EQ(left, (std::set<std::string>{"step-00000002", "step-00000004", "step-00000005"}));
  fs::remove_all(root);
}

TEST(RunState, StageEndCheckpointIsTheNewestEndOfThatStage) {
  const fs::path root = fresh_root("stage_end");
  make_checkpoint(root, 2, 0, true);
  make_checkpoint(root, 7, 0, true);
  make_checkpoint(root, 8, 1, false);
  make_checkpoint(root, 9, 1, true, /*finished=*/false);  // unfinished: not an end
  EXPECT_EQ(fs::path(stage_end_checkpoint(root, 0)).filename(), "step-00000007");
  EXPECT_EQ(stage_end_checkpoint(root, 1), "");
  size_t stage = 9;
  EXPECT_TRUE(is_stage_end_checkpoint(root / "step-00000002", &stage));
  EXPECT_EQ(stage, 0u);
  EXPECT_FALSE(is_stage_end_checkpoint(root / "step-00000008"));
  fs::remove_all(root);
}

}  // namespace
}  // namespace crl::rl
