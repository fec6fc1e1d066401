// Sampling options and engine set-up shared by `crl generate` and `crl eval-model` (sampling_options.h).
#include "apps/crl/sampling_options.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "core/json_bounded.h"
#include "core/read_file.h"
#include "policy/kv_cache.h"

namespace crl::cli {
namespace {

// eos ids from generation_config.json (what transformers' generate() stops on), when present.
std::vector<int64_t> generation_config_eos(const std::filesystem::path& dir) {
  std::vector<int64_t> ids;
  const auto file = dir / "generation_config.json";
  if (!std::filesystem::exists(file)) return ids;
  const nlohmann::json j = parse_json_bounded(read_file(file, "generation config", uint64_t{1} << 20), file.string());
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

}  // namespace

void add_sampling_options(CLI::App* cmd, SamplingArgs& args) {
  cmd->add_option("--max-new-tokens", args.max_new_tokens, "Tokens to generate at most, per completion (a batch request's own \"max_new_tokens\" wins)")
      ->capture_default_str()->check(CLI::Range(int64_t{1}, kMaxNewTokensLimit));
  cmd->add_option("--temperature", args.temperature, "Sampling temperature; 0 = greedy")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", args.top_p, "Nucleus sampling mass in (0, 1]; 1 = off")->capture_default_str();
  cmd->add_option("--top-k", args.top_k, "Keep the k most likely tokens; 0 = off")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", args.seed, "Seed: the same seed gives the same tokens")->capture_default_str();
  cmd->add_option("--device", args.device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", args.dtype, "fp32 or bf16")->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option("--stop", args.stop, "Stop string (repeatable); the completion ends after it");
  cmd->add_flag("--ignore-eos", args.ignore_eos, "Do not stop at the model's end-of-sequence tokens");
  cmd->add_flag("--no-cuda-graph", args.no_cuda_graph, "Run the decode step eagerly on CUDA");
  cmd->add_option("--kv-cache-gb", args.kv_cache_gb, "KV cache budget in GiB; 0 = sized for the requests")
      ->capture_default_str()->check(CLI::NonNegativeNumber);
}

policy::GenerationOptions generation_options_of(const SamplingArgs& args, const policy::CausalLm& model,
                                                const std::filesystem::path& model_dir, int64_t run_limit) {
  policy::GenerationOptions options;
  options.max_new_tokens = run_limit;
  options.sampling.temperature = args.temperature;
  options.sampling.top_p = args.top_p;
  options.sampling.top_k = args.top_k;
  options.sampling.seed = args.seed;
  options.stop_strings = args.stop;
  options.use_cuda_graph = !args.no_cuda_graph;
  if (!args.ignore_eos) {
    options.stop_token_ids = model->config().eos_token_ids;
    for (int64_t id : generation_config_eos(model_dir)) {
      if (std::find(options.stop_token_ids.begin(), options.stop_token_ids.end(), id) == options.stop_token_ids.end()) {
        options.stop_token_ids.push_back(id);
      }
    }
  }
  if (model->config().pad_token_id) options.pad_token_id = *model->config().pad_token_id;
  return options;
}

policy::EngineOptions engine_options_for(const SamplingArgs& args, const std::vector<policy::GenerationRequest>& requests,
                                         const policy::CausalLm& model) {
  policy::EngineOptions engine;
  if (args.kv_cache_gb > 0) {
    engine.kv_cache_bytes = static_cast<int64_t>(args.kv_cache_gb * static_cast<double>(int64_t{1} << 30));
    return engine;
  }
  std::set<std::vector<int64_t>> distinct;
  int64_t blocks = 1;
  for (const auto& r : requests) {
    const auto need = policy::GenerationEngine::block_need(static_cast<int64_t>(r.prompt.size()),
                                                           r.max_new_tokens.value_or(args.max_new_tokens), engine.block_size);
    if (distinct.insert(r.prompt).second) blocks += need.prompt_blocks;
    blocks += need.own_blocks * r.samples;
  }
  engine.kv_cache_bytes =
      std::max<int64_t>(blocks, 2) * policy::PagedKvCache::bytes_per_block(model->config(), engine.block_size, model->dtype());
  return engine;
}

}  // namespace crl::cli
