// Generation options and generate(): one run of a GenerationEngine sized for the call.
#include "policy/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/error.h"
#include "policy/engine.h"

namespace crl::policy {

void GenerationOptions::validate() const {
  if (max_new_tokens <= 0) throw InputError(fmt::format("generate: max_new_tokens {} must be positive", max_new_tokens));
  for (const auto& s : stop_strings) {
    if (s.empty()) throw InputError("generate: a stop string is empty");
  }
  sampling.validate();
}

std::string finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStopToken: return "stop_token";
    case FinishReason::kStopString: return "stop_string";
    case FinishReason::kLength: return "length";
  }
  return "length";
}

GenerationResult generate(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerationOptions& options, const TokenDecoder& decode) {
  options.validate();
  if (prompts.empty()) throw InputError("generate: no prompts");
  // A cache for the worst case of this call: every distinct prompt once, and every sequence
  // (at most max_running at a time) at max_new_tokens.
  EngineOptions engine;
  std::map<std::vector<int64_t>, int64_t> distinct;
  int64_t blocks = 1, own = 0;  // the scratch block
  for (const auto& p : prompts) {
    const auto need = GenerationEngine::block_need(static_cast<int64_t>(p.size()), options.max_new_tokens, engine.block_size);
    if (distinct.emplace(p, 0).second) blocks += need.prompt_blocks;
    own = std::max(own, need.own_blocks);
  }
  blocks += std::min<int64_t>(static_cast<int64_t>(prompts.size()), engine.max_running) * own;
  engine.kv_cache_bytes = std::max<int64_t>(blocks, 2) * PagedKvCache::bytes_per_block(model->config(), engine.block_size, model->dtype());
  GenerationEngine runner(model, engine);
  std::vector<GenerationRequest> requests;
  requests.reserve(prompts.size());
  for (const auto& p : prompts) requests.push_back({p, 1, std::nullopt});
  return runner.run(requests, options, decode);
}

}  // namespace crl::policy
