// `crl generate --model DIR --prompt TEXT [...]`: sample completions from a Hugging Face-format
// model (config.json, safetensors, tokenizer.json) at a terminal; --json for scripts.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "apps/crl/commands.h"
#include "core/error.h"
#include "policy/generate.h"
#include "policy/model.h"
#include "policy/tokenizer.h"

namespace crl::cli {
namespace {

struct GenerateArgs {
  std::string model_dir;
  std::vector<std::string> prompts;
  std::vector<std::string> prompt_ids;  // "1,2,3": token ids directly (models without a tokenizer)
  int64_t max_new_tokens = 128;
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string dtype = "fp32";
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool no_cuda_graph = false;
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

// eos ids from generation_config.json (what transformers' generate() stops on), when present.
std::vector<int64_t> generation_config_eos(const std::filesystem::path& dir) {
  std::vector<int64_t> ids;
  const auto file = dir / "generation_config.json";
  std::ifstream in(file);
  if (!in) return ids;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return ids;
  const auto& e = j["eos_token_id"];
  if (e.is_number_integer()) ids.push_back(e.get<int64_t>());
  else if (e.is_array()) {
    for (const auto& v : e) {
      if (!v.is_number_integer()) throw InputError(fmt::format("{}: field \"eos_token_id\": expected integers", file.string()));
      ids.push_back(v.get<int64_t>());
    }
  } else {
    throw InputError(fmt::format("{}: field \"eos_token_id\": expected an integer or a list", file.string()));
  }
  return ids;
}

int run_generate(const GenerateArgs& args) {
  using namespace crl::policy;
  const std::filesystem::path dir = args.model_dir;
  const bool have_tokenizer = std::filesystem::exists(dir / "tokenizer.json");
  std::optional<Tokenizer> tokenizer;
  if (have_tokenizer) tokenizer = Tokenizer::from_file(dir / "tokenizer.json");
  if (!args.prompts.empty() && !tokenizer) {
    throw InputError(fmt::format("{}: no tokenizer.json, so --prompt cannot be encoded (use --prompt-ids)", dir.string()));
  }
  std::vector<std::vector<int64_t>> prompts;
  for (const auto& text : args.prompts) {
    const auto ids = tokenizer->encode(text, /*add_special_tokens=*/!args.raw);
    prompts.emplace_back(ids.begin(), ids.end());
  }
  for (const auto& text : args.prompt_ids) prompts.push_back(parse_ids(text));
  if (prompts.empty()) throw InputError("give at least one --prompt or --prompt-ids");

  const torch::Device device = parse_device(args.device);
  CausalLm model = load_causal_lm(dir, parse_dtype(args.dtype), device);
  GenerationOptions options;
  options.max_new_tokens = args.max_new_tokens;
  options.sampling.temperature = args.temperature;
  options.sampling.top_p = args.top_p;
  options.sampling.top_k = args.top_k;
  options.sampling.seed = args.seed;
  options.stop_strings = args.stop;
  options.use_cuda_graph = !args.no_cuda_graph;
  if (!args.ignore_eos) {
    options.stop_token_ids = model->config().eos_token_ids;
    for (int64_t id : generation_config_eos(dir)) {
      if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), id) == options.stop_token_ids.end()) {
        options.stop_token_ids.push_back(id);
      }
    }
  }
  if (model->config().pad_token_id) options.pad_token_id = *model->config().pad_token_id;
  TokenDecoder decode;
  if (tokenizer) {
    decode = [&tokenizer](const std::vector<int64_t>& ids) {
      const std::vector<int32_t> narrow(ids.begin(), ids.end());
      return tokenizer->decode(narrow);
    };
  }
  const GenerationResult result = generate(model, prompts, options, decode);
  int64_t generated = 0;
  for (const auto& s : result.sequences) generated += static_cast<int64_t>(s.tokens.size());
  const double tokens_per_second = result.decode_seconds > 0 ? generated / result.decode_seconds : 0;
  if (args.json) {
    nlohmann::json out;
    out["model"] = dir.string();
    out["device"] = args.device;
    out["dtype"] = args.dtype;
    out["seed"] = args.seed;
    out["prefill_seconds"] = result.prefill_seconds;
    out["decode_seconds"] = result.decode_seconds;
    out["generated_tokens"] = generated;
    out["tokens_per_second"] = tokens_per_second;
    out["cuda_graph"] = result.used_cuda_graph;
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
    std::cerr << fmt::format("{} tokens in {:.3f} s decode ({:.1f} tokens/s), prefill {:.3f} s, {} {}{}\n", generated,
                             result.decode_seconds, tokens_per_second, result.prefill_seconds, args.device, args.dtype,
                             result.used_cuda_graph ? ", CUDA graph" : "");
  }
  return kExitOk;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("generate", "Sample completions from a Hugging Face-format model (Qwen2 / Llama)");
  static GenerateArgs args;
  cmd->add_option("--model", args.model_dir, "Model folder: config.json, *.safetensors, tokenizer.json")->required()->check(CLI::ExistingDirectory);
  cmd->add_option("--prompt", args.prompts, "Prompt text (repeat for a batch)");
  cmd->add_option("--prompt-ids", args.prompt_ids, "Prompt as comma-separated token ids (repeatable)");
  cmd->add_option("--max-new-tokens", args.max_new_tokens, "Tokens to generate at most")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--temperature", args.temperature, "Sampling temperature; 0 = greedy")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args.top_p, "Nucleus sampling mass in (0, 1]; 1 = off")->capture_default_str();
  cmd->add_option("--top-k", args.top_k, "Keep the k most likely tokens; 0 = off")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", args.seed, "Seed: the same seed gives the same tokens")->capture_default_str();
  cmd->add_option("--device", args.device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", args.dtype, "fp32 or bf16")->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--stop", args.stop, "Stop string (repeatable); the completion ends after it");
  cmd->add_flag("--ignore-eos", args.ignore_eos, "Do not stop at the model's end-of-sequence tokens");
  cmd->add_flag("--no-cuda-graph", args.no_cuda_graph, "Run the decode step eagerly on CUDA");
  cmd->add_flag("--raw", args.raw, "Do not add the tokenizer's special tokens to prompts");
  cmd->add_flag("--json", args.json, "Print tokens, log-probabilities and timings as JSON");
  cmd->callback([&exit_code] { exit_code = run_generate(args); });
}

}  // namespace crl::cli
