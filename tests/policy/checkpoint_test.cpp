// Tests of training checkpoints: resume restores weights, optimiser, schedule and RNG exactly;
// incomplete and corrupt checkpoints are skipped with the file named; the model folder's tokenizer
// files go with every checkpoint; LoRA writes a PEFT adapter and a merged model; transformers loads
// the model (when the golden Python is present).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

#include <unistd.h>

#include "core/error.h"
#include "core/subprocess.h"
#include "golden_python.h"
#include "tiny_model.h"
#include "policy/checkpoint.h"
#include "policy/config.h"
#include "policy/safetensors.h"
#include "rl/lr_schedule.h"
#include "rl/optimizer.h"

namespace crl::policy {
namespace {
namespace fs = std::filesystem;

using rl::LrSchedule;
using rl::MasterAdamW;
using testing::tiny_model;

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("crl_checkpoint_test_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  return dir;
}

std::vector<std::pair<std::string, torch::Tensor>> trainable(CausalLm& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& [name, t] : state_tensors(model)) out.emplace_back(name, t.set_requires_grad(true));
  return out;
}

// What a checkpoint of `model` trained by `opt` (through `lora`, when given) holds at `step`.
CheckpointContents contents(const CausalLm& model, const MasterAdamW& opt, int64_t step = 0,
                            const LoraAdapters* lora = nullptr) {
  CheckpointContents c;
  c.model = &model;
  c.optimizer = &opt;
  c.step = step;
  c.lora = lora;
  return c;
}

// What `crl run` does to resume (rl/trainer_rank.cpp, rl/step_pipeline.cpp): the newest checkpoint
// that passes its check, then its weights, optimiser state and generator states.
struct Resumed {
  fs::path dir;
  CheckpointState state;
  std::vector<std::string> skipped;  // newer checkpoints that failed their check
};
std::optional<Resumed> resume_newest(const fs::path& root, CausalLm& model, LoraAdapters* lora, OptimizerState& optimizer) {
  Resumed r;
  const std::optional<fs::path> dir = find_latest_checkpoint(root, &r.skipped);
  if (!dir) return std::nullopt;
  r.dir = *dir;
  r.state = read_checkpoint_state(*dir);
  load_checkpoint_weights(*dir, model, lora);
  load_checkpoint_optimizer(*dir, optimizer);
  load_checkpoint_generators(*dir, 0);
  return r;
}

void random_steps(MasterAdamW& opt, int steps) {
  for (int i = 0; i < steps; ++i) {
    std::vector<torch::Tensor> grads;
    for (const auto& [name, p] : opt.parameters()) grads.push_back(torch::randn(p.sizes()));
    opt.step(grads, 1e-3);
  }
}

TEST(Checkpoint, ResumeRestoresModelOptimiserScheduleAndRng) {
  const fs::path root = fresh_dir("resume");
  CausalLm model = tiny_model(1);
  MasterAdamW opt(trainable(model), {});
  random_steps(opt, 2);
  CheckpointContents c = contents(model, opt, 2);
  c.schedule = LrSchedule{3e-4, 5, 50, 0.2}.to_json();
  c.user_state = {{"data_position", 17}};
  torch::manual_seed(1234);
  const fs::path dir = save_checkpoint(root, c);
  EXPECT_EQ(dir.filename(), "step-00000002");
  EXPECT_TRUE(fs::exists(dir / "DONE"));
  const torch::Tensor draw_after_save = torch::rand({3});

  CausalLm other = tiny_model(2);
  MasterAdamW other_opt(trainable(other), {});
  torch::manual_seed(999);
  const auto resumed = resume_newest(root, other, nullptr, other_opt);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->state.step, 2);
  EXPECT_EQ(LrSchedule::from_json(resumed->state.schedule, "resumed").warmup_steps, 5);
  EXPECT_EQ(resumed->state.user_state["data_position"], 17);
  EXPECT_TRUE(torch::equal(torch::rand({3}), draw_after_save));  // the CPU generator came back
  for (const auto& [name, t] : state_tensors(model)) EXPECT_TRUE(torch::equal(t, other->named_parameters()[name])) << name;
  EXPECT_EQ(other_opt.steps(), 2);
  // Both continue identically.
  torch::manual_seed(5);
  random_steps(opt, 1);
  torch::manual_seed(5);
  random_steps(other_opt, 1);
  for (const auto& [name, t] : state_tensors(model)) EXPECT_TRUE(torch::equal(t, other->named_parameters()[name])) << name;
  fs::remove_all(root);
}

TEST(Checkpoint, CorruptAndUnfinishedCheckpointsAreSkippedForThePreviousOne) {
  const fs::path root = fresh_dir("corrupt");
  CausalLm model = tiny_model(1);
  MasterAdamW opt(trainable(model), {});
  CheckpointContents c = contents(model, opt, 1);
  save_checkpoint(root, c);
  const torch::Tensor step1_weight = state_tensors(model)[0].second.clone();
  random_steps(opt, 1);
  c.step = 2;
  const fs::path newest = save_checkpoint(root, c);
  c.step = 3;
  const fs::path unfinished = save_checkpoint(root, c);
  fs::remove(unfinished / "DONE");
  // Flip one byte in the middle of step 2's weights.
  {
    std::fstream f(newest / "model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char byte = 0;
    f.read(&byte, 1);
    byte ^= 0x5a;
    f.seekp(-100, std::ios::end);
    f.write(&byte, 1);
  }
  const auto checks = check_checkpoints(root);
  ASSERT_EQ(checks.size(), 3u);
  EXPECT_FALSE(checks[0].ok);
  EXPECT_NE(checks[0].problem.find("DONE"), std::string::npos) << checks[0].problem;
  EXPECT_FALSE(checks[1].ok);
  EXPECT_NE(checks[1].problem.find("model.safetensors"), std::string::npos) << checks[1].problem;
  EXPECT_TRUE(checks[2].ok);

  CausalLm other = tiny_model(3);
  MasterAdamW other_opt(trainable(other), {});
  const auto resumed = resume_newest(root, other, nullptr, other_opt);
  ASSERT_TRUE(resumed.has_value());
  EXPECT_EQ(resumed->state.step, 1);
  EXPECT_EQ(resumed->skipped.size(), 2u);
  EXPECT_TRUE(torch::equal(state_tensors(other)[0].second, step1_weight));
  fs::remove_all(root);
}

// Issue 43: a checkpoint is a model folder Hugging Face's tools load whole, tokenizer included.
TEST(Checkpoint, CarriesTheTokenizerFilesOfItsModelFolder) {
  const fs::path root = fresh_dir("tokenizer");
  const fs::path model_dir = root / "model";
  fs::create_directories(model_dir / "vocab.json");  // a folder of that name is no file to copy
  const auto write = [&](const std::string& name, const std::string& text) { std::ofstream(model_dir / name, std::ios::binary) << text; };
  write("tokenizer.json", "{\"model\": {\"type\": \"BPE\"}}");
  write("tokenizer_config.json", "{\"eos_token\": \"<|endoftext|>\"}");
  write("chat_template.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}");
  write("generation_config.json", "{\"eos_token_id\": 0}");
  write("README.md", "not a tokenizer file");
  CausalLm model = tiny_model(1);
  MasterAdamW opt(trainable(model), {});
  CheckpointContents c = contents(model, opt, 1);
  c.tokenizer_from = model_dir;
  const fs::path dir = save_checkpoint(root / "checkpoints", c);
  const nlohmann::json done = nlohmann::json::parse(std::ifstream(dir / "DONE"));
  for (const char* name : {"tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"}) {
    ASSERT_TRUE(fs::is_regular_file(dir / name)) << name;
    std::ifstream copy(dir / name, std::ios::binary), original(model_dir / name, std::ios::binary);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(copy), {}), std::string(std::istreambuf_iterator<char>(original), {})) << name;
    EXPECT_TRUE(done["sha256"].contains(name)) << name << " is not in DONE: " << done.dump();
  }
  EXPECT_FALSE(fs::exists(dir / "README.md"));
  EXPECT_FALSE(fs::exists(dir / "vocab.json"));
  EXPECT_TRUE(check_checkpoints(root / "checkpoints").at(0).ok);
  // The copies are hashed like every file of the checkpoint: a changed one fails its check.
  std::ofstream(dir / "tokenizer.json", std::ios::app) << " ";
  const auto checks = check_checkpoints(root / "checkpoints");
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].ok);
  EXPECT_NE(checks[0].problem.find("tokenizer.json"), std::string::npos) << checks[0].problem;
  fs::remove_all(root);
}

TEST(Checkpoint, EmptyRootHasNothingToResume) {
  CausalLm model = tiny_model(1);
  MasterAdamW opt(trainable(model), {});
  EXPECT_FALSE(resume_newest(fresh_dir("empty"), model, nullptr, opt).has_value());
}

TEST(Checkpoint, LoraWritesPeftAdapterAndMergedModelAndResumesAdapters) {
  const fs::path root = fresh_dir("lora");
  CausalLm model = tiny_model(4);
  LoraConfig config;
  config.rank = 4;
  LoraAdapters lora(model, config, 5);
  MasterAdamW opt(lora.named_parameters(), {});
  random_steps(opt, 2);
  CheckpointContents c = contents(model, opt, 2, &lora);
  c.base_model = "tiny";
  const fs::path dir = save_checkpoint(root, c);
  for (const char* name : {"adapter/adapter_config.json", "adapter/adapter_model.safetensors", "config.json", "model.safetensors"}) {
    EXPECT_TRUE(fs::exists(dir / name)) << name;
  }
  // Nothing of the adapter beside the merged model: transformers would apply it once more.
  EXPECT_FALSE(fs::exists(dir / "adapter_config.json"));
  SafetensorsCheckpoint adapter(dir / "adapter" / "adapter_model.safetensors");
  EXPECT_TRUE(adapter.contains("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"));
  SafetensorsCheckpoint merged(dir / "model.safetensors");
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_FALSE(torch::equal(merged.tensor(q), model->named_parameters()[q]));  // the delta is in

  CausalLm base_again = tiny_model(4);
  LoraAdapters lora_again(base_again, config, 77);
  MasterAdamW opt_again(lora_again.named_parameters(), {});
  ASSERT_TRUE(resume_newest(root, base_again, &lora_again, opt_again).has_value());
  for (size_t i = 0; i < lora.named_parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(lora.named_parameters()[i].second, lora_again.named_parameters()[i].second));
  }
  // The flag by which crl run refuses to resume a LoRA checkpoint as full fine-tuning (and back).
  EXPECT_TRUE(read_checkpoint_state(dir).lora);
  CausalLm full = tiny_model(6);
  MasterAdamW full_opt(trainable(full), {});
  const fs::path full_root = fresh_dir("full");
  EXPECT_FALSE(read_checkpoint_state(save_checkpoint(full_root, contents(full, full_opt, 3))).lora);
  fs::remove_all(full_root);
  fs::remove_all(root);
}

using testing::golden_python;

// Runs `script` (which prints "LOGITS v1 v2 ...") with `args`, and returns the values.
std::vector<double> python_logits(const fs::path& python, const std::string& script, std::vector<std::string> args) {
  args.insert(args.begin(), {python.string(), "-c", script});
  const auto result = run_command(args);
  EXPECT_TRUE(result.ok()) << result.output;
  const size_t at = result.output.find("LOGITS ");
  EXPECT_NE(at, std::string::npos) << result.output;
  std::vector<double> values;
  if (at == std::string::npos) return values;
  std::istringstream in(result.output.substr(at + 7));
  for (double v = 0; in >> v;) values.push_back(v);
  return values;
}

// The test ids' last-position logits (the first 8) of the model `m` a script built, as python_logits reads them.
constexpr const char* kPrintLogits =
    "print('LOGITS', ' '.join(f'{v:.6f}' for v in m(torch.tensor([[3,14,15,92,65]])).logits[0, -1, :8].tolist()))\n";

// What transformers computes for the test ids from a checkpoint folder it loads by itself.
std::vector<double> transformers_logits(const fs::path& python, const fs::path& folder) {
  const std::string script = std::string("import sys, torch, transformers\n"
                                         "m = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32).eval()\n") +
                             kPrintLogits;
  return python_logits(python, script, {folder.string()});
}

// Their 8 logits are crl's `ours` [1, 5, V] at the last position.
void expect_same_logits(const std::vector<double>& theirs, const torch::Tensor& ours) {
  ASSERT_EQ(theirs.size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(theirs[i], ours[0][4][i].item<double>(), 1e-4) << i;
}

TEST(Checkpoint, TransformersLoadsTheSavedModel) {
  const fs::path python = golden_python();
  if (python.empty()) GTEST_SKIP() << "no golden Python with transformers in ~/.local/share/crl/golden-venv";
  if (!run_command({python.string(), "-c", "import torch, transformers"}).ok()) {
    GTEST_SKIP() << "torch or transformers is not installed in " << python;
  }
  const fs::path root = fresh_dir("hf");
  CausalLm model = tiny_model(6);
  MasterAdamW opt(trainable(model), {});
  const fs::path dir = save_checkpoint(root, contents(model, opt));
  const torch::Tensor ids = torch::tensor({{3, 14, 15, 92, 65}}, torch::kInt64);
  const torch::Tensor ours = model->forward(ids).detach();
  expect_same_logits(transformers_logits(python, dir), ours);
  fs::remove_all(root);
}

// The PEFT adapter crl writes loads in peft itself onto the base model, and computes what crl's
// adapted model computes (dropout configured, inactive in eval mode on both sides).
TEST(Checkpoint, PeftLoadsTheAdapterOntoTheBaseModel) {
  const fs::path python = golden_python();
  if (python.empty()) GTEST_SKIP() << "no golden Python with transformers and peft in ~/.local/share/crl/golden-venv";
  if (!run_command({python.string(), "-c", "import peft"}).ok()) GTEST_SKIP() << "peft is not installed in " << python;
  const fs::path root = fresh_dir("peft");
  // The base model, saved as it is.
  CausalLm base = tiny_model(4);
  MasterAdamW base_opt(trainable(base), {});
  const fs::path base_dir = save_checkpoint(root / "base", contents(base, base_opt));
  // An adapted copy with trained-looking adapters on some modules.
  CausalLm model = tiny_model(4);
  LoraConfig config;
  config.rank = 4;
  config.alpha = 8;
  config.dropout = 0.1;
  config.target_modules = {"q_proj", "v_proj", "down_proj"};
  LoraAdapters lora(model, config, 5);
  {
    torch::NoGradGuard no_grad;
    torch::manual_seed(2);
    for (auto& [name, p] : lora.named_parameters()) p.normal_(0, 0.1);
  }
  MasterAdamW opt(lora.named_parameters(), {});
  CheckpointContents c = contents(model, opt, 0, &lora);
  c.base_model = base_dir.string();
  const fs::path adapter_dir = save_checkpoint(root / "adapter", c);
  lora.apply();
  model->eval();
  const torch::Tensor ids = torch::tensor({{3, 14, 15, 92, 65}}, torch::kInt64);
  const torch::Tensor ours = model->forward(ids).detach();
  const std::string script = std::string("import sys, torch, transformers, peft\n"
                                         "base = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)\n"
                                         "m = peft.PeftModel.from_pretrained(base, sys.argv[2]).eval()\n") +
                             kPrintLogits;
  const torch::Tensor base_logits = base->forward(ids).detach();
  EXPECT_FALSE(torch::allclose(ours, base_logits, 1e-3, 1e-3));  // the adapters change the output
  expect_same_logits(python_logits(python, script, {base_dir.string(), (adapter_dir / "adapter").string()}), ours);
  // transformers given the checkpoint folder itself loads the merged model: the adapted model once
  // (with peft installed, an adapter_config.json there made it add the adapter a second time).
  expect_same_logits(transformers_logits(python, adapter_dir), ours);
  fs::remove_all(root);
}

}  // namespace
}  // namespace crl::policy
