// Atomic training checkpoints with a hashed DONE marker (see checkpoint.h).
#include "policy/checkpoint.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_EXCHANGE
#include <unistd.h>

#include <algorithm>
#include <map>
#include <fstream>
#include <string_view>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_bounded.h"
#include "core/hash.h"
#include "core/read_file.h"
#include "core/remove_tree.h"
#include "policy/config.h"
#include "policy/safetensors.h"

#ifdef CRL_HAVE_CUDA
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAContext.h>
#endif

namespace crl::policy {
namespace fs = std::filesystem;
namespace {

constexpr const char* kDone = "DONE";
// The LoRA adapter's own folder: PEFT loads it from there, and transformers, given the checkpoint
// folder, loads the merged model alone (an adapter_config.json beside model.safetensors makes it
// apply the adapter once more, on weights that already hold it).
constexpr const char* kAdapterDir = "adapter";

// A file the DONE manifest may name: a plain name in the checkpoint, or one in its adapter folder
// (never a path that leaves the checkpoint).
bool is_manifest_name(const std::string& name) {
  const auto plain = [](std::string_view part) { return !part.empty() && part[0] != '.' && part.find('/') == std::string_view::npos; };
  const auto slash = name.find('/');
  if (slash == std::string::npos) return plain(name);
  return std::string_view(name).substr(0, slash) == kAdapterDir && plain(std::string_view(name).substr(slash + 1));
}
// The DONE manifest and trainer_state.json are small; anything larger is not crl's.
constexpr uint64_t kMaxJsonBytes = uint64_t{64} << 20;

std::string step_name(int64_t step) { return fmt::format("step-{:08d}", step); }

std::string file_sha256(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("{}: cannot open for reading", path.string()));
  Sha256 hasher;
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    if (in.gcount() > 0) hasher.update(std::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
  }
  if (in.bad()) throw IoError(fmt::format("{}: read failed", path.string()));
  return hasher.hex();
}

}  // namespace

const std::vector<std::string>& tokenizer_files() {
  // transformers' save_pretrained writes these (tokenizer_config.json holding the special tokens,
  // and since 4.43 the chat template as chat_template.jinja); slow tokenizers read vocab.json and
  // merges.txt (BPE) or tokenizer.model (SentencePiece).
  static const std::vector<std::string> names = {
      "tokenizer.json",      "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
      "vocab.json",          "merges.txt",            "tokenizer.model",         "chat_template.jinja",
      "chat_template.json",  "generation_config.json"};
  return names;
}

NamedTensors generator_states() {
  NamedTensors out;
  out.emplace_back("cpu", at::detail::getDefaultCPUGenerator().get_state());
#ifdef CRL_HAVE_CUDA
  if (torch::cuda::is_available()) {
    for (int64_t d = 0; d < static_cast<int64_t>(torch::cuda::device_count()); ++d) {
      out.emplace_back(fmt::format("cuda:{}", d), at::cuda::detail::getDefaultCUDAGenerator(d).get_state());
    }
  }
#endif
  return out;
}

namespace {

// `prefix` is "" (this process's states) or "rank3." (one rank's of a job's).
void restore_rng(const SafetensorsCheckpoint& file, const std::string& prefix, const std::string& origin) {
  if (!file.contains(prefix + "cpu")) throw InputError(fmt::format("{}: no generator state \"{}cpu\"", origin, prefix));
  // Generator handles share their implementation: setting the copy's state sets the default's.
  at::Generator cpu = at::detail::getDefaultCPUGenerator();
  {
    std::lock_guard<std::mutex> lock(cpu.mutex());
    cpu.set_state(file.tensor(prefix + "cpu").clone());
  }
#ifdef CRL_HAVE_CUDA
  if (torch::cuda::is_available()) {
    for (int64_t d = 0; d < static_cast<int64_t>(torch::cuda::device_count()); ++d) {
      const std::string name = fmt::format("{}cuda:{}", prefix, d);
      if (!file.contains(name)) continue;
      at::Generator cuda = at::cuda::detail::getDefaultCUDAGenerator(d);
      std::lock_guard<std::mutex> lock(cuda.mutex());
      cuda.set_state(file.tensor(name).clone());
    }
  }
#endif
}

CheckpointCheck check_one(const fs::path& dir) {
  CheckpointCheck check;
  check.dir = dir;
  const fs::path done = dir / kDone;
  if (!fs::exists(done)) {
    check.problem = fmt::format("{}: missing (the checkpoint was not finished)", done.string());
    return check;
  }
  nlohmann::json manifest;
  try {
    manifest = parse_json_bounded(read_file(done, "checkpoint DONE marker", kMaxJsonBytes), done.string());
    for (const auto& [name, hash] : manifest.at("sha256").items()) {
      const fs::path file = dir / name;
      if (!is_manifest_name(name)) {
        check.problem = fmt::format("{}: file name \"{}\" is not a plain name (or adapter/<plain name>)", done.string(), name);
        return check;
      }
      if (!fs::exists(file)) {
        check.problem = fmt::format("{}: missing (listed in DONE)", file.string());
        return check;
      }
      if (file_sha256(file) != hash.get<std::string>()) {
        check.problem = fmt::format("{}: SHA-256 differs from the one in DONE (corrupt)", file.string());
        return check;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    check.problem = fmt::format("{}: not a valid checkpoint manifest: {}", done.string(), e.what());
    return check;
  } catch (const Error& e) {
    check.problem = e.what();
    return check;
  }
  check.ok = true;
  return check;
}

// Copies the tokenizer files `from` holds into `to` (durably, as every file of a checkpoint),
// returning their names. Regular files only; a symlink is followed, as in a Hugging Face cache's
// snapshot folder.
std::vector<std::string> copy_tokenizer_files(const fs::path& from, const fs::path& to) {
  std::vector<std::string> copied;
  std::vector<char> buffer(1 << 20);
  for (const std::string& name : tokenizer_files()) {
    std::error_code ec;
    if (!fs::is_regular_file(from / name, ec)) continue;
    std::ifstream in(from / name, std::ios::binary);
    if (!in) throw IoError(fmt::format("{}: cannot open for reading (copying it into the checkpoint)", (from / name).string()));
    AtomicFileWriter out(to / name);
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      if (in.gcount() > 0) out.write(buffer.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) throw IoError(fmt::format("{}: read failed (copying it into the checkpoint)", (from / name).string()));
    out.commit();
    copied.push_back(name);
  }
  return copied;
}

// Makes the folder's renames durable (a lost node keeps them); a failure only costs that.
void sync_folder(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// The step folders under `root`, newest first: step-N, and .old-step-N where step-N is missing (a
// save that replaced step-N was cut off between its two renames, on a file system without
// renameat2's exchange: .old-step-N is then the whole, earlier step-N).
std::vector<fs::path> step_dirs(const fs::path& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return {};
  std::map<std::string, fs::path> by_step;  // "step-00000042" -> its folder
  std::vector<fs::path> set_aside;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory(ec)) continue;
    if (name.rfind("step-", 0) == 0) by_step[name] = entry.path();
    if (name.rfind(".old-step-", 0) == 0) set_aside.push_back(entry.path());
  }
  for (const auto& dir : set_aside) by_step.emplace(dir.filename().string().substr(5), dir);
  std::vector<fs::path> out;
  for (auto it = by_step.rbegin(); it != by_step.rend(); ++it) out.push_back(it->second);
  return out;
}

}  // namespace

fs::path save_checkpoint(const fs::path& root, const CheckpointContents& contents) {
  if (contents.model == nullptr || contents.optimizer == nullptr) {
    throw InputError("save_checkpoint: the model and the optimiser are required");
  }
  const CausalLm& model = *contents.model;
  const fs::path final_dir = root / step_name(contents.step);
  const fs::path temp_dir = root / (".tmp-" + step_name(contents.step));
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) throw IoError(fmt::format("{}: cannot create the checkpoint root: {}", root.string(), ec.message()), ec.value());
  remove_tree(temp_dir);
  // A replacement cut off between its renames left the whole earlier step as .old-step-N: back
  // into place, so that this save replaces it as any other.
  if (const fs::path old_dir = root / (".old-" + step_name(contents.step)); fs::exists(old_dir) && !fs::exists(final_dir)) {
    fs::rename(old_dir, final_dir, ec);
    if (ec) throw IoError(fmt::format("{}: cannot move back to {}: {}", old_dir.string(), final_dir.string(), ec.message()), ec.value());
  }
  fs::create_directory(temp_dir, ec);
  if (ec) throw IoError(fmt::format("{}: cannot create: {}", temp_dir.string(), ec.message()), ec.value());

  std::vector<std::string> files;
  const auto add_file = [&](const std::string& name) { files.push_back(name); };
  ModelConfig config = model->config();
  if (contents.lora == nullptr || contents.lora_write_merged_model) {
    config.dtype = model->dtype() == torch::kBFloat16  ? "bfloat16"
                   : model->dtype() == torch::kFloat16 ? "float16"
                                                       : "float32";
    save_model_config(config, temp_dir / "config.json");
    add_file("config.json");
    const NamedTensors weights = contents.lora ? contents.lora->merged_state_tensors() : state_tensors(model);
    write_safetensors(temp_dir / "model.safetensors", weights, {{"format", "pt"}});
    add_file("model.safetensors");
  }
  if (contents.lora != nullptr) {
    fs::create_directory(temp_dir / kAdapterDir, ec);
    if (ec) throw IoError(fmt::format("{}: cannot create: {}", (temp_dir / kAdapterDir).string(), ec.message()), ec.value());
    const fs::path adapter = fs::path(kAdapterDir);
    write_file_atomically(temp_dir / adapter / "adapter_config.json", contents.lora->adapter_config(contents.base_model).dump(2));
    add_file((adapter / "adapter_config.json").string());
    write_safetensors(temp_dir / adapter / "adapter_model.safetensors", contents.lora->named_parameters(), {{"format", "pt"}});
    add_file((adapter / "adapter_model.safetensors").string());
  }
  write_safetensors(temp_dir / "optimizer.safetensors", contents.optimizer->state_tensors());
  add_file("optimizer.safetensors");
  NamedTensors generators;
  if (contents.rank_generator_states.empty()) {
    generators = generator_states();
  } else {
    for (size_t r = 0; r < contents.rank_generator_states.size(); ++r) {
      for (const auto& [name, state] : contents.rank_generator_states[r]) generators.emplace_back(fmt::format("rank{}.{}", r, name), state);
    }
  }
  write_safetensors(temp_dir / "rng.safetensors", generators);
  add_file("rng.safetensors");
  nlohmann::json state = {{"step", contents.step},
                          {"schedule", contents.schedule},
                          {"lora", contents.lora != nullptr},
                          {"user_state", contents.user_state}};
  write_file_atomically(temp_dir / "trainer_state.json", state.dump(2));
  add_file("trainer_state.json");
  if (!contents.tokenizer_from.empty()) {
    for (const std::string& name : copy_tokenizer_files(contents.tokenizer_from, temp_dir)) add_file(name);
  }

  nlohmann::json manifest = {{"step", contents.step}, {"sha256", nlohmann::json::object()}};
  for (const auto& name : files) manifest["sha256"][name] = file_sha256(temp_dir / name);
  write_file_atomically(temp_dir / kDone, manifest.dump(2));

  if (fs::exists(final_dir)) {
    // A step saved twice (e.g. after a resume): the new one replaces it in one atomic exchange, so
    // that step-N names the old checkpoint or the new one at every instant; the old one then goes.
    if (::renameat2(AT_FDCWD, temp_dir.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
      sync_folder(root);
      remove_tree(temp_dir);
      return final_dir;
    }
    // No exchange on this file system: move the old one aside first. Until the second rename it is
    // .old-step-N, which find_latest_checkpoint takes for step-N (and the next save puts back).
    const fs::path old_dir = root / (".old-" + step_name(contents.step));
    remove_tree(old_dir);
    fs::rename(final_dir, old_dir, ec);
    if (ec) throw IoError(fmt::format("{}: cannot move aside: {}", final_dir.string(), ec.message()), ec.value());
    fs::rename(temp_dir, final_dir, ec);
    if (!ec) remove_tree(old_dir);
  } else {
    fs::rename(temp_dir, final_dir, ec);
  }
  if (ec) throw IoError(fmt::format("{}: cannot rename to {}: {}", temp_dir.string(), final_dir.string(), ec.message()), ec.value());
  sync_folder(root);
  return final_dir;
}

std::vector<CheckpointCheck> check_checkpoints(const fs::path& root) {
  std::vector<CheckpointCheck> out;
  for (const auto& dir : step_dirs(root)) out.push_back(check_one(dir));
  return out;
}

std::optional<fs::path> find_latest_checkpoint(const fs::path& root, std::vector<std::string>* skipped) {
  for (const fs::path& dir : step_dirs(root)) {
    const CheckpointCheck check = check_one(dir);
    if (check.ok) return dir;
    spdlog::warn("checkpoint {} skipped: {}", dir.string(), check.problem);
    if (skipped != nullptr) skipped->push_back(check.problem);
  }
  return std::nullopt;
}

CheckpointState read_checkpoint_state(const fs::path& dir) {
  const fs::path state_file = dir / "trainer_state.json";
  try {
    const nlohmann::json state = parse_json_bounded(read_file(state_file, "trainer state", kMaxJsonBytes), state_file.string());
    CheckpointState out;
    out.step = state.at("step").get<int64_t>();
    out.schedule = state.at("schedule");
    out.lora = state.at("lora").get<bool>();
    out.user_state = state.at("user_state");
    return out;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: {}", state_file.string(), e.what()));
  }
}

void load_checkpoint_weights(const fs::path& dir, CausalLm& model, LoraAdapters* lora) {
  torch::NoGradGuard no_grad;
  if (lora != nullptr) {
    // Checkpoints before the adapter had its own folder kept it beside the model.
    fs::path file = dir / kAdapterDir / "adapter_model.safetensors";
    if (!fs::exists(file) && fs::exists(dir / "adapter_model.safetensors")) file = dir / "adapter_model.safetensors";
    lora->load_adapter_tensors(SafetensorsCheckpoint(file).load_all(), file.string());
  } else {
    const fs::path file = dir / "model.safetensors";
    load_state(model, SafetensorsCheckpoint(file).load_all(), file.string());
  }
}

void load_checkpoint_optimizer(const fs::path& dir, OptimizerState& optimizer) {
  const fs::path file = dir / "optimizer.safetensors";
  optimizer.load_state_tensors(SafetensorsCheckpoint(file).load_all(), file.string());
}

void load_checkpoint_generators(const fs::path& dir, int rank) {
  const fs::path path = dir / "rng.safetensors";
  const SafetensorsCheckpoint file(path);
  const std::string prefix = fmt::format("rank{}.", rank);
  restore_rng(file, file.contains(prefix + "cpu") ? prefix : "", path.string());
}

}  // namespace crl::policy
