// The continuous-batching generation engine (engine.h): admission under the KV budget, one prefill
// per distinct prompt, decode steps (CUDA graphs per shape bucket), stop rules, results.
#include "policy/engine.h"

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstring>
#include <deque>
#include <set>

#include "core/clock.h"
#include "core/error.h"
#include "core/statistics.h"

#ifdef CRL_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace crl::policy {
namespace {

// Columns of a decode step's packed inputs, before the block table.
// kRandomBits: counter_bits(key, step) of the row's sequence, computed on the host, so the device
// does no hashing.
enum InputColumn : int64_t { kToken = 0, kPosition, kWriteSlot, kLength, kRandomBits, kTableStart };

constexpr int64_t kMaxSamples = int64_t{1} << 24;
// Padded prompt tokens in one prefill pass at most (bounds its activations; a longer prompt runs alone).
constexpr int64_t kPrefillTokens = 16384;

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Running sequences per graph: the next power of two, so at most 2x padding rows and few graphs.
int64_t row_bucket(int64_t rows, int64_t max_running) {
  return std::min(static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(rows))), max_running);
}

// Blocks read per graph: powers of two up to 16, then multiples of 16 (the attention reads at most
// 16 blocks more than the longest sequence needs).
int64_t block_bucket(int64_t blocks) {
  if (blocks <= 16) return static_cast<int64_t>(std::bit_ceil(static_cast<uint64_t>(blocks)));
  return ceil_div(blocks, 16) * 16;
}

// The shortest prefix (in tokens) whose text contains a stop string, or -1.
int64_t stop_string_cut(const std::vector<int64_t>& tokens, const std::vector<std::string>& stops, const TokenDecoder& decode) {
  auto contains_stop = [&](int64_t n) {
    const std::string text = decode(std::vector<int64_t>(tokens.begin(), tokens.begin() + n));
    return std::any_of(stops.begin(), stops.end(), [&](const std::string& s) { return text.find(s) != std::string::npos; });
  };
  const int64_t total = static_cast<int64_t>(tokens.size());
  if (total == 0 || !contains_stop(total)) return -1;
  int64_t lo = 1, hi = total;  // contains_stop(hi) holds
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (contains_stop(mid)) hi = mid; else lo = mid + 1;
  }
  return hi;
}

std::string cut_after_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = std::string::npos;
  for (const auto& s : stops) {
    const size_t at = text.find(s);
    if (at != std::string::npos) best = std::min(best, at + s.size());
  }
  return best == std::string::npos ? text : text.substr(0, best);
}

}  // namespace

void EngineOptions::validate() const {
  if (block_size < 1 || block_size > 1024) throw InputError(fmt::format("generation engine: block_size {} must be in [1, 1024]", block_size));
  if (max_running < 1 || max_running > 4096) {
    throw InputError(fmt::format("generation engine: max_running {} must be in [1, 4096]", max_running));
  }
  if (kv_cache_bytes <= 0) throw InputError(fmt::format("generation engine: kv_cache_bytes {} must be positive", kv_cache_bytes));
}

struct GenerationEngine::Prompt {
  std::vector<int64_t> ids;
  std::vector<int64_t> blocks;  // the cache of ids[0 .. L-2], while samples wait for admission
  int64_t max_new_tokens = 0;   // the largest limit of its requests (its blocks are sized for it)
  bool prefilled = false;
  int64_t unadmitted = 0;       // samples not yet admitted
  BlockNeed need;
};

struct GenerationEngine::Sequence {
  int64_t index = 0;             // in result.sequences
  int64_t key = 0;               // sampling key
  Prompt* prompt = nullptr;
  std::vector<int64_t> blocks;   // block table, token order
  int64_t cached = 0;            // tokens in the cache: the position of next_input
  int64_t next_input = 0;        // the token the next step feeds
  int64_t reserved = 0;          // blocks promised to it and not yet allocated
  int64_t max_new_tokens = 0;
  GeneratedSequence out;
  bool done = false;
};

#ifdef CRL_HAVE_CUDA
struct GenerationEngine::Graph {
  at::cuda::CUDAGraph graph;
  torch::Tensor inputs;   // static [rows, kTableStart + blocks] int64
  torch::Tensor outputs;  // static [rows, 3] float64: token, logprob, model logprob
};
#else
struct GenerationEngine::Graph {
  torch::Tensor inputs, outputs;
};
#endif

namespace {

int64_t pool_blocks(const CausalLm& model, const EngineOptions& options) {
  options.validate();
  const int64_t per_block = PagedKvCache::bytes_per_block(model->config(), options.block_size, model->dtype());
  const int64_t blocks = options.kv_cache_bytes / per_block;
  if (blocks < 2) {
    throw InputError(fmt::format("generation engine: kv_cache_bytes {} holds fewer than 2 blocks of {} bytes", options.kv_cache_bytes, per_block));
  }
  return blocks;
}

}  // namespace

GenerationEngine::GenerationEngine(CausalLm model, EngineOptions options)
    : model_(std::move(model)),
      options_(options),
      cache_(PagedKvCache::allocate(model_->config(), pool_blocks(model_, options_), options_.block_size, model_->dtype(),
                                    model_->device())),
      allocator_(cache_.num_blocks) {}

GenerationEngine::~GenerationEngine() = default;

GenerationEngine::BlockNeed GenerationEngine::block_need(int64_t prompt_tokens, int64_t max_new_tokens, int64_t block_size) {
  // The cache holds the prompt but its last token, then each step's input: at most
  // prompt_tokens - 1 + max_new_tokens slots (the last sampled token is never fed back).
  const int64_t cached_prompt = std::max<int64_t>(prompt_tokens - 1, 0);
  BlockNeed need;
  need.prompt_blocks = ceil_div(cached_prompt, block_size);
  need.shared_blocks = cached_prompt / block_size;
  need.own_blocks = ceil_div(cached_prompt + max_new_tokens, block_size) - need.shared_blocks;
  return need;
}

uint64_t GenerationEngine::model_signature() const {
  // A captured graph reads the parameters and LoRA tensors by address and follows the adapters
  // attached at capture: any change of either calls for new graphs.
  uint64_t h = 0x9E3779B97F4A7C15ULL;
  const auto mix = [&h](uint64_t v) { h = mix64(h ^ v); };
  for (const auto& p : model_->parameters()) mix(reinterpret_cast<uintptr_t>(p.data_ptr()));
  const auto mix_slots = [&](const LoraSlots& slots) {
    for (const auto& [name, branch] : slots.branches) {
      mix(std::hash<std::string>{}(name));
      mix(reinterpret_cast<uintptr_t>(branch->a.data_ptr()));
      mix(reinterpret_cast<uintptr_t>(branch->b.data_ptr()));
      mix(std::bit_cast<uint64_t>(branch->scale));
    }
  };
  for (const auto& layer : *model_->model->layers) {
    const auto& decoder_layer = layer->as<DecoderLayer>();
    mix_slots(decoder_layer->self_attn->lora);
    mix_slots(decoder_layer->mlp->lora);
  }
  return h;
}

void GenerationEngine::prefill(const std::vector<Prompt*>& prompts, GenerationResult& result) {
  // Right padded into one batch: causal attention never looks right, so a row's padding changes
  // nothing of its real tokens, and the fused causal kernel applies. Padding writes the scratch slot.
  if (prompts.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  const int64_t bs = cache_.block_size;
  int64_t width = 0;
  for (const Prompt* p : prompts) width = std::max<int64_t>(width, static_cast<int64_t>(p->ids.size()) - 1);
  const int64_t rows = static_cast<int64_t>(prompts.size());
  std::vector<int64_t> ids(static_cast<size_t>(rows * width), 0), slots(static_cast<size_t>(rows * width), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const Prompt& p = *prompts[static_cast<size_t>(r)];
    const int64_t cached = static_cast<int64_t>(p.ids.size()) - 1;
    for (int64_t t = 0; t < cached; ++t) {
      ids[static_cast<size_t>(r * width + t)] = p.ids[static_cast<size_t>(t)];
      slots[static_cast<size_t>(r * width + t)] = p.blocks[static_cast<size_t>(t / bs)] * bs + t % bs;
    }
    result.prefill_tokens += cached;
  }
  const torch::Device device = model_->device();
  const auto long_options = torch::TensorOptions().dtype(torch::kInt64).device(device);
  ForwardInputs in;
  in.input_ids = torch::tensor(ids, torch::kInt64).view({rows, width}).to(device);
  in.position_ids = torch::arange(width, long_options).view({1, width}).expand({rows, width}).contiguous();
  in.cache = &cache_;
  in.cache_slots = torch::tensor(slots, torch::kInt64).to(device);
  in.last_position_only = true;  // the logits are not used: the last prompt token is each sample's first decode input
  model_->forward(in);
  synchronize(device);
  result.prefill_seconds += seconds_since(start);
}

torch::Tensor GenerationEngine::step_outputs(const torch::Tensor& inputs, int64_t blocks, const SamplingOptions& sampling) {
  const int64_t rows = inputs.size(0);
  ForwardInputs in;
  in.input_ids = inputs.narrow(1, kToken, 1).contiguous();
  in.position_ids = inputs.narrow(1, kPosition, 1).contiguous();
  in.cache_slots = inputs.select(1, kWriteSlot).contiguous();
  in.block_tables = inputs.narrow(1, kTableStart, blocks).contiguous();
  // Slot j of a row's blocks holds its token j: visible while j < the row's length.
  in.key_lengths = inputs.select(1, kLength).contiguous();
  in.cache = &cache_;
  const torch::Tensor logits = model_->forward(in).view({rows, -1});
  const SampledTokens s = sample_tokens_with_uniform(logits, sampling, uniform_from_bits(inputs.select(1, kRandomBits)));
  return torch::stack({s.tokens.to(torch::kFloat64), s.logprobs.to(torch::kFloat64), s.model_logprobs.to(torch::kFloat64)}, 1);
}

GenerationEngine::Graph& GenerationEngine::graph_for(int64_t rows, int64_t blocks, const GenerationOptions& options) {
  const GraphKey key{rows, blocks, options.sampling.temperature, options.sampling.top_k, options.sampling.top_p};
  if (const auto it = graphs_.find(key); it != graphs_.end()) return *it->second;
  auto graph = std::make_unique<Graph>();
#ifdef CRL_HAVE_CUDA
  // All rows padding: they write and read the scratch block only, so the warm-up runs and the
  // capture leave every sequence's cache as it was.
  const torch::Device device = model_->device();
  graph->inputs = torch::zeros({rows, kTableStart + blocks}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  graph->inputs.select(1, kToken).fill_(options.pad_token_id);
  graph->inputs.select(1, kLength).fill_(1);
  if (!graph_pool_) graph_pool_ = at::cuda::graph_pool_handle();
  auto side_stream = c10::cuda::getStreamFromPool(false, device.index());
  const auto main_stream = c10::cuda::getCurrentCUDAStream(device.index());
  at::cuda::CUDAEvent before;
  before.record(main_stream);
  before.block(side_stream);
  {
    c10::cuda::CUDAStreamGuard guard(side_stream);
    for (int i = 0; i < 2; ++i) step_outputs(graph->inputs, blocks, options.sampling);  // kernels chosen, workspaces made
    graph->graph.capture_begin(*graph_pool_);
    graph->outputs = step_outputs(graph->inputs, blocks, options.sampling);
    graph->graph.capture_end();
  }
  at::cuda::CUDAEvent after;
  after.record(side_stream);
  after.block(main_stream);
#else
  (void)rows;
  (void)blocks;
  (void)options;
  throw Error("generation engine: CUDA graphs need a CUDA build");
#endif
  return *graphs_.emplace(key, std::move(graph)).first->second;
}

void GenerationEngine::decode_step(std::vector<Sequence*>& running, const GenerationOptions& options, GenerationResult& result) {
  const int64_t bs = cache_.block_size;
  const int64_t rows = static_cast<int64_t>(running.size());
  int64_t blocks = 1;
  for (Sequence* s : running) {
    if (s->cached == static_cast<int64_t>(s->blocks.size()) * bs) {  // this step's token starts a block
      allocator_.unreserve(1);
      --s->reserved;
      s->blocks.push_back(allocator_.allocate());
    }
    blocks = std::max<int64_t>(blocks, static_cast<int64_t>(s->blocks.size()));
  }
  const torch::Device device = model_->device();
  bool graph = false;
#ifdef CRL_HAVE_CUDA
  graph = options.use_cuda_graph && device.is_cuda();
#endif
  const int64_t padded_rows = graph ? row_bucket(rows, options_.max_running) : rows;
  const int64_t padded_blocks = graph ? block_bucket(blocks) : blocks;
  const int64_t columns = kTableStart + padded_blocks;
  const int64_t elements = padded_rows * columns;
  if (!staging_.defined() || staging_.numel() < elements) {
    staging_ = torch::empty({std::max<int64_t>(elements, 4096)}, torch::TensorOptions().dtype(torch::kInt64).pinned_memory(device.is_cuda()));
  }
  const torch::Tensor host = staging_.narrow(0, 0, elements).view({padded_rows, columns});
  int64_t* data = host.data_ptr<int64_t>();
  std::fill(data, data + elements, 0);
  for (int64_t r = 0; r < padded_rows; ++r) {
    int64_t* row = data + r * columns;
    if (r >= rows) {  // padding: the scratch block, slot 0, one visible key
      row[kToken] = options.pad_token_id;
      row[kLength] = 1;
      continue;
    }
    const Sequence& s = *running[static_cast<size_t>(r)];
    row[kToken] = s.next_input;
    row[kPosition] = s.cached;
    row[kWriteSlot] = s.blocks[static_cast<size_t>(s.cached / bs)] * bs + s.cached % bs;
    row[kLength] = s.cached + 1;
    row[kRandomBits] = counter_bits(s.key, static_cast<int64_t>(s.out.tokens.size()));
    std::copy(s.blocks.begin(), s.blocks.end(), row + kTableStart);
  }
  torch::Tensor outputs;
  if (graph) {
    Graph& g = graph_for(padded_rows, padded_blocks, options);
    g.inputs.copy_(host, /*non_blocking=*/true);
#ifdef CRL_HAVE_CUDA
    g.graph.replay();
#endif
    outputs = g.outputs;
    result.used_cuda_graph = true;
  } else {
    outputs = step_outputs(device.is_cpu() ? host : host.to(device, /*non_blocking=*/true), padded_blocks, options.sampling);
  }
  // The one host sync of a step: its tokens (and their log-probabilities) come back.
  const torch::Tensor read = outputs.narrow(0, 0, rows).to(torch::kCPU).contiguous();
  const double* values = read.data_ptr<double>();
  for (int64_t r = 0; r < rows; ++r) {
    Sequence& s = *running[static_cast<size_t>(r)];
    s.out.tokens.push_back(static_cast<int64_t>(values[3 * r]));
    s.out.logprobs.push_back(static_cast<float>(values[3 * r + 1]));
    s.out.model_logprobs.push_back(static_cast<float>(values[3 * r + 2]));
    ++s.cached;
  }
  ++result.decode_steps;
  result.decoded_rows += rows;
  result.peak_running = std::max(result.peak_running, rows);
}

GenerationResult GenerationEngine::run(const std::vector<GenerationRequest>& requests, const GenerationOptions& options,
                                       const TokenDecoder& decode) {
  options.validate();
  if (!options.stop_strings.empty() && !decode) throw InputError("generate: stop strings need a tokenizer to decode text");
  if (requests.empty()) throw InputError("generate: no prompts");
  const ModelConfig& config = model_->config();
  const int64_t vocab = config.vocab_size;
  if (options.pad_token_id < 0 || options.pad_token_id >= vocab) {
    throw InputError(fmt::format("generate: pad token id {} outside the vocabulary [0, {})", options.pad_token_id, vocab));
  }
  int64_t total_samples = 0;
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& r = requests[i];
    if (r.prompt.empty()) throw InputError(fmt::format("generate: prompt {} has no tokens", i));
    if (r.samples < 1) throw InputError(fmt::format("generate: request {} asks for {} samples (at least 1)", i, r.samples));
    for (int64_t id : r.prompt) {
      if (id < 0 || id >= vocab) {
        throw InputError(fmt::format("generate: prompt {} holds token id {} outside the vocabulary [0, {})", i, id, vocab));
      }
    }
    if (r.max_new_tokens && (*r.max_new_tokens < 1 || *r.max_new_tokens > options.max_new_tokens)) {
      throw InputError(fmt::format("generate: request {} asks for max_new_tokens {}; it must be in [1, {}] (the run's limit)", i,
                                   *r.max_new_tokens, options.max_new_tokens));
    }
    // Each request by its own limit: a short one beside a long one is not refused for the long one's.
    const int64_t limit = r.max_new_tokens.value_or(options.max_new_tokens);
    const int64_t positions = static_cast<int64_t>(r.prompt.size()) + limit;
    if (config.rope.type == RopeType::kDynamic && positions > config.max_position_embeddings) {
      throw InputError(fmt::format("generate: {} positions exceed max_position_embeddings {}; crl applies dynamic rope "
                                   "scaling only within that length", positions, config.max_position_embeddings));
    }
    const BlockNeed need = block_need(static_cast<int64_t>(r.prompt.size()), limit, cache_.block_size);
    if (need.prompt_blocks + need.own_blocks > usable_blocks()) {
      throw InputError(fmt::format("generate: prompt {} ({} tokens) with max_new_tokens {} needs {} KV blocks; the cache holds {} "
                                   "(raise kv_cache_bytes or lower max_new_tokens)", i, r.prompt.size(), limit,
                                   need.prompt_blocks + need.own_blocks, usable_blocks()));
    }
    total_samples += r.samples;
    if (total_samples > kMaxSamples) throw InputError(fmt::format("generate: more than {} samples in one run", kMaxSamples));
  }
  torch::NoGradGuard no_grad;
  const FusedInferenceKernels fused(options_.fused_kernels);
  model_->eval();
  if (const uint64_t signature = model_signature(); signature != graph_signature_) {
    graphs_.clear();
    // A fresh pool handle for the new graphs: the allocator keeps a pool whose graphs are all gone
    // with a use count of 0, and capturing into it again fails its assert (use_count > 0). The old
    // pool is left to the allocator, which frees it with the rest of its cache.
    graph_pool_.reset();
    graph_signature_ = signature;
  }

  // Distinct prompts, each prefilled once for all of its samples, across requests too.
  std::map<std::vector<int64_t>, size_t> prompt_index;
  std::deque<Prompt> prompts;
  std::vector<Sequence> sequences(static_cast<size_t>(total_samples));
  std::deque<Sequence*> waiting;
  int64_t next = 0;
  for (const GenerationRequest& r : requests) {
    auto [it, inserted] = prompt_index.emplace(r.prompt, prompts.size());
    if (inserted) {
      prompts.emplace_back();
      prompts.back().ids = r.prompt;
    }
    Prompt& prompt = prompts[it->second];
    const int64_t limit = r.max_new_tokens.value_or(options.max_new_tokens);
    prompt.max_new_tokens = std::max(prompt.max_new_tokens, limit);
    prompt.need = block_need(static_cast<int64_t>(r.prompt.size()), prompt.max_new_tokens, cache_.block_size);
    prompt.unadmitted += r.samples;
    for (int64_t s = 0; s < r.samples; ++s) {
      Sequence& seq = sequences[static_cast<size_t>(next)];
      seq.index = next;
      const int64_t id = r.first_sequence_id ? *r.first_sequence_id + s : next;
      seq.key = sequence_key(options.sampling.seed, static_cast<uint64_t>(id));
      seq.prompt = &prompt;
      seq.max_new_tokens = limit;
      waiting.push_back(&seq);
      ++next;
    }
  }

  const std::set<int64_t> stop_set(options.stop_token_ids.begin(), options.stop_token_ids.end());
  size_t longest_stop = 0;
  for (const auto& s : options.stop_strings) longest_stop = std::max(longest_stop, s.size());
  // A stop string of n bytes ends within the last n + a few tokens (a token is at least a byte,
  // but a UTF-8 character can span tokens): the tail is enough to notice it. The exact cut is made
  // over the whole completion at the end.
  const size_t stop_window = longest_stop + 8;
  GenerationResult result;
  std::vector<Sequence*> running;
  const auto start = std::chrono::steady_clock::now();
  while (!waiting.empty() || !running.empty()) {
    // Admission: claim blocks for as many waiting sequences as fit, prefill their new prompts in
    // batches of at most kPrefillTokens padded tokens, then give each its blocks.
    std::vector<Sequence*> admitted;
    std::vector<Prompt*> to_prefill;
    int64_t prefill_width = 0;
    const auto flush_prefill = [&] {
      prefill(to_prefill, result);
      to_prefill.clear();
      prefill_width = 0;
    };
    while (!waiting.empty() && static_cast<int64_t>(running.size() + admitted.size()) < options_.max_running) {
      Sequence& s = *waiting.front();
      Prompt& p = *s.prompt;
      const int64_t needed = p.need.own_blocks + (p.prefilled ? 0 : p.need.prompt_blocks);
      if (allocator_.available() < needed) break;
      if (!p.prefilled) {
        p.prefilled = true;
        for (int64_t i = 0; i < p.need.prompt_blocks; ++i) p.blocks.push_back(allocator_.allocate());
        const int64_t width = static_cast<int64_t>(p.ids.size()) - 1;
        if (width > 0) {
          const int64_t padded = std::max(prefill_width, width) * static_cast<int64_t>(to_prefill.size() + 1);
          if (!to_prefill.empty() && padded > kPrefillTokens) flush_prefill();
          to_prefill.push_back(&p);
          prefill_width = std::max(prefill_width, width);
        }
      }
      allocator_.reserve(p.need.own_blocks);
      s.reserved = p.need.own_blocks;
      admitted.push_back(&s);
      waiting.pop_front();
    }
    flush_prefill();
    for (Sequence* admitted_sequence : admitted) {
      Sequence& s = *admitted_sequence;
      Prompt& p = *s.prompt;
      for (int64_t b = 0; b < p.need.shared_blocks; ++b) {
        allocator_.retain(p.blocks[static_cast<size_t>(b)]);
        s.blocks.push_back(p.blocks[static_cast<size_t>(b)]);
      }
      if (p.need.prompt_blocks > p.need.shared_blocks) {  // copy-on-write of the partly filled last block
        allocator_.unreserve(1);
        --s.reserved;
        const int64_t own = allocator_.allocate();
        cache_.copy_block(p.blocks.back(), own);
        s.blocks.push_back(own);
      }
      s.cached = static_cast<int64_t>(p.ids.size()) - 1;
      s.next_input = p.ids.back();
      if (--p.unadmitted == 0) {  // the samples hold the shared blocks now
        for (int64_t b : p.blocks) allocator_.release(b);
        p.blocks.clear();
      }
      running.push_back(&s);
    }
    if (running.empty()) throw Error("generation engine: nothing admitted although every sequence fits the cache");
    decode_step(running, options, result);
    for (Sequence* s : running) {
      const int64_t token = s->out.tokens.back();
      if (stop_set.contains(token)) {
        s->done = true;
        s->out.finish_reason = FinishReason::kStopToken;
      } else if (!options.stop_strings.empty()) {
        const size_t n = s->out.tokens.size();
        const size_t from = n > stop_window ? n - stop_window : 0;
        const std::string tail = decode(std::vector<int64_t>(s->out.tokens.begin() + static_cast<std::ptrdiff_t>(from), s->out.tokens.end()));
        for (const auto& stop : options.stop_strings) {
          if (tail.find(stop) != std::string::npos) s->done = true;
        }
      }
      if (static_cast<int64_t>(s->out.tokens.size()) == s->max_new_tokens) s->done = true;
      if (!s->done) {
        s->next_input = token;
        continue;
      }
      for (int64_t b : s->blocks) allocator_.release(b);
      s->blocks.clear();
      allocator_.unreserve(s->reserved);
      s->reserved = 0;
    }
    std::erase_if(running, [](const Sequence* s) { return s->done; });
  }
  result.decode_seconds = seconds_since(start) - result.prefill_seconds;

  for (Sequence& s : sequences) {
    GeneratedSequence& seq = s.out;
    if (!options.stop_strings.empty()) {
      const int64_t cut = stop_string_cut(seq.tokens, options.stop_strings, decode);
      if (cut >= 0) {
        seq.tokens.resize(static_cast<size_t>(cut));
        seq.logprobs.resize(static_cast<size_t>(cut));
        seq.model_logprobs.resize(static_cast<size_t>(cut));
        seq.finish_reason = FinishReason::kStopString;
      }
    }
    if (decode) {
      seq.text = decode(seq.tokens);
      if (seq.finish_reason == FinishReason::kStopString) seq.text = cut_after_stop(seq.text, options.stop_strings);
    }
    result.sequences.push_back(std::move(seq));
  }
  return result;
}

}  // namespace crl::policy
