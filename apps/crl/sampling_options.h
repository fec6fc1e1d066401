// Sampling from a Hugging Face-format model folder with the generation engine, as `crl generate` and
// `crl eval-model` both do: the options (temperature, top-p, top-k, seed, limits, device, dtype,
// stop strings), the stop tokens (the model's end-of-sequence ids and generation_config.json's),
// and the KV cache sized for a run's requests.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "policy/engine.h"
#include "policy/generate.h"
#include "policy/model.h"

namespace crl::cli {

// The most tokens one completion may ask for (--max-new-tokens, a batch request's "max_new_tokens"):
// the KV cache is sized from it before anything is generated.
inline constexpr int64_t kMaxNewTokensLimit = 65536;

struct SamplingArgs {
  int64_t max_new_tokens = 128;  // per completion (a batch request's own limit wins in crl generate)
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string dtype = "fp32";
  std::vector<std::string> stop;
  bool ignore_eos = false;
  bool no_cuda_graph = false;
  double kv_cache_gb = 0;  // 0: sized for the requests
};

// Adds --max-new-tokens, --temperature, --top-p, --top-k, --seed, --device, --dtype, --stop,
// --ignore-eos, --no-cuda-graph and --kv-cache-gb; their defaults are `args`' values.
void add_sampling_options(CLI::App* cmd, SamplingArgs& args);

// The engine's options for a run whose longest request may write `run_limit` tokens: the sampling,
// and (unless --ignore-eos) stops at the model's end-of-sequence ids and generation_config.json's
// eos_token_id (what transformers' generate() stops on). InputError naming the file when
// generation_config.json is malformed.
policy::GenerationOptions generation_options_of(const SamplingArgs& args, const policy::CausalLm& model,
                                                const std::filesystem::path& model_dir, int64_t run_limit);

// The KV budget: --kv-cache-gb, or every distinct prompt and every sample at its limit (the engine
// then runs everything at once, up to its max_running sequences); a request without its own limit
// has --max-new-tokens.
policy::EngineOptions engine_options_for(const SamplingArgs& args, const std::vector<policy::GenerationRequest>& requests,
                                         const policy::CausalLm& model);

}  // namespace crl::cli
