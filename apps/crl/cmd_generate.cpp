// `crl generate --model DIR --prompt TEXT [...]` or `--batch-file FILE`: sample completions from a
// Hugging Face-format model (config.json, safetensors, tokenizer.json) with the continuous-batching
// engine, at a terminal; --json for scripts.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>

#include "apps/crl/commands.h"
#include "apps/crl/input_paths.h"
#include "apps/crl/sampling_options.h"
#include "core/error.h"
#include "core/json_bounded.h"
#include "core/read_file.h"
#include "policy/checkpoint.h"
#include "policy/engine.h"
#include "policy/generate.h"
#include "policy/model.h"
#include "policy/tokenizer.h"

namespace crl::cli {
namespace {

struct GenerateArgs {
  std::string model_dir;
  std::vector<std::string> prompts;
  std::vector<std::string> prompt_ids;  // "1,2,3": token ids directly (models without a tokenizer)
  std::string batch_file;               // JSON Lines: one request per line (see read_batch_file)
  int64_t samples = 1;                  // completions per --prompt / --prompt-ids
  SamplingArgs sampling;                // its max_new_tokens: per --prompt / --prompt-ids, and per batch request without its own
  bool raw = false;  // no special tokens added to the prompt
  bool json = false;
};

std::vector<int64_t> parse_ids(const std::string& text) {
  std::vector<int64_t> ids;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      size_t used = 0;
      ids.push_back(std::stoll(item, &used));
      if (used != item.size()) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      throw InputError(fmt::format("--prompt-ids: \"{}\" is not a comma-separated list of integers", text));
    }
  }
  if (ids.empty()) throw InputError("--prompt-ids: no ids given");
  return ids;
}

// Why a model folder's tokenizer is missing, for the error of a prompt given as text: a crl
// checkpoint written before checkpoints carried their model's tokenizer files names that model.
std::string missing_tokenizer(const std::filesystem::path& dir) {
  std::string hint = "use --prompt-ids or prompt_ids, or copy tokenizer.json and tokenizer_config.json from the model it was made from";
  std::error_code ec;
  if (std::filesystem::exists(dir / "trainer_state.json", ec)) {
    const nlohmann::json job = policy::read_checkpoint_state(dir).user_state.value("job_config", nlohmann::json::object());
    if (job.is_object() && job.contains("model") && job["model"].is_string()) {
      hint = fmt::format("a crl checkpoint from before checkpoints carried their tokenizer: copy tokenizer.json and "
                         "tokenizer_config.json from the job's model folder '{}' into it, or use --prompt-ids",
                         job["model"].get<std::string>());
    }
  }
  return fmt::format("{}: no tokenizer.json, so a prompt given as text cannot be encoded ({})", dir.string(), hint);
}

// A batch file: one JSON object per line, {"prompt": TEXT} or {"prompt_ids": [ids]}, and optionally
// "samples" (completions of that prompt, default 1) and "max_new_tokens" (that request's limit, up
// to kMaxNewTokensLimit; without it, --max-new-tokens).
std::vector<policy::GenerationRequest> read_batch_file(const std::string& path, const std::optional<policy::Tokenizer>& tokenizer,
                                                       const std::filesystem::path& model_dir, bool raw) {
  constexpr size_t kMaxLines = 1 << 20;
  constexpr int64_t kMaxSamples = 4096;
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("--batch-file {}: cannot be read", path));
  std::vector<policy::GenerationRequest> requests;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    if (requests.size() >= kMaxLines) throw InputError(fmt::format("{}: more than {} requests", path, kMaxLines));
    const std::string where = fmt::format("{}:{}", path, number);
    const nlohmann::json j = parse_json_bounded(line, where);
    if (!j.is_object()) throw InputError(fmt::format("{}: expected an object with \"prompt\" or \"prompt_ids\"", where));
    policy::GenerationRequest r;
    if (j.contains("prompt") == j.contains("prompt_ids")) {
      throw InputError(fmt::format("{}: give exactly one of \"prompt\" (text) and \"prompt_ids\" (token ids)", where));
    }
    if (j.contains("prompt")) {
      if (!j["prompt"].is_string()) throw InputError(fmt::format("{}: field \"prompt\": expected a string", where));
      if (!tokenizer) throw InputError(fmt::format("{}: field \"prompt\": {}", where, missing_tokenizer(model_dir)));
      const auto ids = tokenizer->encode(j["prompt"].get<std::string>(), /*add_special_tokens=*/!raw);
      r.prompt.assign(ids.begin(), ids.end());
    } else {
      if (!j["prompt_ids"].is_array()) throw InputError(fmt::format("{}: field \"prompt_ids\": expected a list of integers", where));
      for (const auto& v : j["prompt_ids"]) {
        if (!v.is_number_integer()) throw InputError(fmt::format("{}: field \"prompt_ids\": expected integers", where));
        r.prompt.push_back(v.get<int64_t>());
      }
    }
    if (j.contains("samples")) {
      if (!j["samples"].is_number_integer() || j["samples"].get<int64_t>() < 1 || j["samples"].get<int64_t>() > kMaxSamples) {
        throw InputError(fmt::format("{}: field \"samples\": expected an integer in [1, {}]", where, kMaxSamples));
      }
      r.samples = j["samples"].get<int64_t>();
    }
    if (j.contains("max_new_tokens")) {
      const auto& limit = j["max_new_tokens"];
      if (!limit.is_number_integer() || limit.get<int64_t>() < 1 || limit.get<int64_t>() > kMaxNewTokensLimit) {
        throw InputError(fmt::format("{}: field \"max_new_tokens\": expected an integer in [1, {}]", where, kMaxNewTokensLimit));
      }
      r.max_new_tokens = limit.get<int64_t>();
    }
    requests.push_back(std::move(r));
  }
  if (requests.empty()) throw InputError(fmt::format("--batch-file {}: no requests", path));
  return requests;
}

int run_generate(const GenerateArgs& args) {
  using namespace crl::policy;
  const std::filesystem::path dir = args.model_dir;
  const bool have_tokenizer = std::filesystem::exists(dir / "tokenizer.json");
  std::optional<Tokenizer> tokenizer;
  if (have_tokenizer) tokenizer = Tokenizer::from_file(dir / "tokenizer.json");
  if (!args.prompts.empty() && !tokenizer) throw InputError(fmt::format("--prompt: {}", missing_tokenizer(dir)));
  std::vector<GenerationRequest> requests;
  for (const auto& text : args.prompts) {
    const auto ids = tokenizer->encode(text, /*add_special_tokens=*/!args.raw);
    requests.push_back({std::vector<int64_t>(ids.begin(), ids.end()), args.samples, std::nullopt, std::nullopt});
  }
  for (const auto& text : args.prompt_ids) requests.push_back({parse_ids(text), args.samples, std::nullopt, std::nullopt});
  if (!args.batch_file.empty()) {
    for (auto& r : read_batch_file(args.batch_file, tokenizer, dir, args.raw)) requests.push_back(std::move(r));
  }
  if (requests.empty()) throw InputError("give at least one --prompt, --prompt-ids or --batch-file");
  // Every request's limit stated (its own, or --max-new-tokens); the run's is the largest.
  int64_t run_limit = args.sampling.max_new_tokens;
  for (auto& r : requests) {
    if (!r.max_new_tokens) r.max_new_tokens = args.sampling.max_new_tokens;
    run_limit = std::max(run_limit, *r.max_new_tokens);
  }

  const torch::Device device = parse_device(args.sampling.device);
  CausalLm model = load_causal_lm(dir, parse_dtype(args.sampling.dtype), device);
  const GenerationOptions options = generation_options_of(args.sampling, model, dir, run_limit);
  TokenDecoder decode;
  if (tokenizer) {
    decode = [&tokenizer](const std::vector<int64_t>& ids) { return tokenizer->decode_sampled(ids); };
  }
  const EngineOptions engine = engine_options_for(args.sampling, requests, model);
  GenerationEngine runner(model, engine);
  const GenerationResult result = runner.run(requests, options, decode);
  std::vector<std::vector<int64_t>> prompts;  // the prompt of each completion
  for (const auto& r : requests) for (int64_t s = 0; s < r.samples; ++s) prompts.push_back(r.prompt);
  int64_t generated = 0;
  for (const auto& s : result.sequences) generated += static_cast<int64_t>(s.tokens.size());
  const double tokens_per_second = result.decode_seconds > 0 ? generated / result.decode_seconds : 0;
  if (args.json) {
    nlohmann::json out;
    out["model"] = dir.string();
    out["device"] = args.sampling.device;
    out["dtype"] = args.sampling.dtype;
    out["seed"] = args.sampling.seed;
    out["prefill_seconds"] = result.prefill_seconds;
    out["decode_seconds"] = result.decode_seconds;
    out["generated_tokens"] = generated;
    out["tokens_per_second"] = tokens_per_second;
    out["cuda_graph"] = result.used_cuda_graph;
    out["decode_steps"] = result.decode_steps;
    out["prefill_tokens"] = result.prefill_tokens;
    out["peak_running"] = result.peak_running;
    out["kv_cache_bytes"] = runner.cache().bytes();
    out["logprobs_are"] = "log-probability under the sampling distribution actually used (temperature, top-k, top-p; 0 when greedy)";
    out["model_logprobs_are"] = "log_softmax of the model's raw logits (temperature 1, no filtering)";
    out["completions"] = nlohmann::json::array();
    for (size_t i = 0; i < result.sequences.size(); ++i) {
      const auto& s = result.sequences[i];
      nlohmann::json c;
      c["prompt_tokens"] = prompts[i];
      c["tokens"] = s.tokens;
      c["logprobs"] = s.logprobs;
      c["model_logprobs"] = s.model_logprobs;
      c["finish_reason"] = finish_reason_name(s.finish_reason);
      if (tokenizer) c["text"] = s.text;
      out["completions"].push_back(c);
    }
    std::cout << out.dump(2) << "\n";
  } else {
    for (size_t i = 0; i < result.sequences.size(); ++i) {
      const auto& s = result.sequences[i];
      if (result.sequences.size() > 1) std::cout << fmt::format("--- completion {} ({}) ---\n", i, finish_reason_name(s.finish_reason));
      if (tokenizer) {
        std::cout << s.text << "\n";
      } else {
        std::cout << fmt::format("{}\n", fmt::join(s.tokens, " "));
      }
    }
    std::cerr << fmt::format("{} tokens in {:.3f} s decode ({:.1f} tokens/s, {} steps, up to {} sequences at once), "
                             "prefill {:.3f} s ({} tokens), {} {}{}\n", generated, result.decode_seconds, tokens_per_second,
                             result.decode_steps, result.peak_running, result.prefill_seconds, result.prefill_tokens, args.sampling.device,
                             args.sampling.dtype, result.used_cuda_graph ? ", CUDA graph" : "");
  }
  return kExitOk;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("generate", "Sample completions from a Hugging Face-format model (Qwen2 / Llama)");
  static GenerateArgs args;
  cmd->add_option("--model", args.model_dir, "Model folder (config.json, *.safetensors, tokenizer.json), or a checkpoint of crl run (RUN/checkpoints/step-N)")->required()->check(existing_input(PathKind::directory, "--model"));
  cmd->add_option("--prompt", args.prompts, "Prompt text (repeat for a batch)");
  cmd->add_option("--prompt-ids", args.prompt_ids, "Prompt as comma-separated token ids (repeatable)");
  cmd->add_option("--batch-file", args.batch_file,
                  fmt::format("JSON Lines of requests: {{\"prompt\": TEXT}} or {{\"prompt_ids\": [ids]}}, optional \"samples\" and "
                              "\"max_new_tokens\" (that request's limit, up to {}; without it --max-new-tokens)", kMaxNewTokensLimit))
      ->check(existing_input(PathKind::file, "--batch-file"));
  cmd->add_option("--samples", args.samples, "Completions per --prompt / --prompt-ids (one shared prefill)")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  add_sampling_options(cmd, args.sampling);
  cmd->add_flag("--raw", args.raw, "Do not add the tokenizer's special tokens to prompts");
  cmd->add_flag("--json", args.json, "Print tokens, log-probabilities and timings as JSON");
  cmd->callback([&exit_code] { exit_code = run_generate(args); });
}

}  // namespace crl::cli
