// Batched generation: left-padded prefill into a static KV cache, decode steps (CUDA graph on the
// GPU), on-device sampling, stop tokens and stop strings.
#include "policy/generate.h"

#include <fmt/format.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "core/error.h"

#ifdef CRL_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace crl::policy {

void GenerationOptions::validate() const {
  if (max_new_tokens <= 0) throw InputError(fmt::format("generate: max_new_tokens {} must be positive", max_new_tokens));
  if (sync_every <= 0) throw InputError(fmt::format("generate: sync_every {} must be positive", sync_every));
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

#ifdef CRL_HAVE_CUDA
struct BatchedDecoder::Graph {
  at::cuda::CUDAGraph graph;
};
#else
struct BatchedDecoder::Graph {};
#endif

BatchedDecoder::BatchedDecoder(CausalLm model, const std::vector<std::vector<int64_t>>& prompts, int64_t capacity,
                               int64_t pad_token_id, bool use_cuda_graph)
    : model_(std::move(model)), capacity_(capacity) {
  if (prompts.empty()) throw InputError("generate: no prompts");
  batch_ = static_cast<int64_t>(prompts.size());
  const int64_t vocab = model_->config().vocab_size;
  std::vector<int64_t> pads(batch_);
  for (int64_t b = 0; b < batch_; ++b) {
    if (prompts[b].empty()) throw InputError(fmt::format("generate: prompt {} has no tokens", b));
    width_ = std::max<int64_t>(width_, static_cast<int64_t>(prompts[b].size()));
    for (int64_t id : prompts[b]) {
      if (id < 0 || id >= vocab) {
        throw InputError(fmt::format("generate: prompt {} holds token id {} outside the vocabulary [0, {})", b, id, vocab));
      }
    }
  }
  if (pad_token_id < 0 || pad_token_id >= vocab) {
    throw InputError(fmt::format("generate: pad token id {} outside the vocabulary [0, {})", pad_token_id, vocab));
  }
  if (capacity_ <= width_) {
    throw InputError(fmt::format("generate: capacity {} leaves no room after the longest prompt ({} tokens)", capacity_, width_));
  }
  std::vector<int64_t> block(batch_ * width_, pad_token_id);
  for (int64_t b = 0; b < batch_; ++b) {
    pads[b] = width_ - static_cast<int64_t>(prompts[b].size());
    std::copy(prompts[b].begin(), prompts[b].end(), block.begin() + b * width_ + pads[b]);
  }
  const torch::Device device = model_->device();
  const auto long_options = torch::TensorOptions().dtype(torch::kInt64).device(device);
  prompt_ids_ = torch::tensor(block, torch::kInt64).view({batch_, width_}).to(device);
  pad_counts_ = torch::tensor(pads, torch::kInt64).to(device);
  key_index_ = torch::arange(capacity_, long_options);
  tokens_ = torch::zeros({batch_, 1}, long_options);
  slot_ = torch::full({1}, width_, long_options);
  cache_ = KvCache::allocate(model_->config(), batch_, capacity_, model_->dtype(), device);
#ifdef CRL_HAVE_CUDA
  want_graph_ = use_cuda_graph && device.is_cuda();
#else
  want_graph_ = false;
  (void)use_cuda_graph;
#endif
}

BatchedDecoder::~BatchedDecoder() = default;

torch::Tensor BatchedDecoder::prefill() {
  torch::NoGradGuard no_grad;
  const auto device = prompt_ids_.device();
  const auto long_options = torch::TensorOptions().dtype(torch::kInt64).device(device);
  const auto bool_options = torch::TensorOptions().dtype(torch::kBool).device(device);
  const torch::Tensor columns = torch::arange(width_, long_options);
  ForwardInputs in;
  in.input_ids = prompt_ids_;
  // Real tokens count positions from 0 (transformers: cumsum(attention_mask) - 1).
  in.position_ids = (columns.unsqueeze(0) - pad_counts_.unsqueeze(1)).clamp_min(0);
  const torch::Tensor causal = torch::ones({width_, width_}, bool_options).tril().view({1, 1, width_, width_});
  const torch::Tensor real_keys = (columns.view({1, 1, 1, width_}) >= pad_counts_.view({batch_, 1, 1, 1}));
  // A padding query row sees only itself, so SDPA never meets an all-masked row (NaN).
  const torch::Tensor self = torch::eye(width_, bool_options).view({1, 1, width_, width_});
  in.attention_mask = (causal & real_keys) | self;
  in.cache = &cache_;
  in.cache_slots = columns;
  in.kv_length = width_;
  in.last_position_only = true;
  const torch::Tensor logits = model_->forward(in).squeeze(1);
  next_slot_ = width_;
  slot_.fill_(width_);
  return logits;
}

torch::Tensor BatchedDecoder::decode_forward(int64_t kv_length) {
  ForwardInputs in;
  in.input_ids = tokens_;
  in.position_ids = (slot_.view({1, 1}) - pad_counts_.view({batch_, 1}));
  const torch::Tensor keys = key_index_.narrow(0, 0, kv_length).view({1, 1, 1, kv_length});
  in.attention_mask = (keys >= pad_counts_.view({batch_, 1, 1, 1})) & (keys <= slot_.view({1, 1, 1, 1}));
  in.cache = &cache_;
  in.cache_slots = slot_;
  in.kv_length = kv_length;
  return model_->forward(in).view({batch_, -1});
}

void BatchedDecoder::capture_graph() {
#ifdef CRL_HAVE_CUDA
  graph_ = std::make_unique<Graph>();
  auto side_stream = c10::cuda::getStreamFromPool();
  const auto main_stream = c10::cuda::getCurrentCUDAStream();
  at::cuda::CUDAEvent before;
  before.record(main_stream);
  before.block(side_stream);
  {
    c10::cuda::CUDAStreamGuard guard(side_stream);
    // Warm-up runs pick kernels and allocate workspaces outside the capture. They write the slot
    // the real step is about to overwrite, so the cache is unchanged in effect.
    for (int i = 0; i < 2; ++i) decode_forward(capacity_);
    graph_->graph.capture_begin();
    graph_logits_ = decode_forward(capacity_);
    graph_->graph.capture_end();
  }
  at::cuda::CUDAEvent after;
  after.record(side_stream);
  after.block(main_stream);
  graph_ready_ = true;
#endif
}

torch::Tensor BatchedDecoder::step(const torch::Tensor& tokens) {
  torch::NoGradGuard no_grad;
  if (next_slot_ >= capacity_) {
    throw InputError(fmt::format("generate: the KV cache is full ({} slots)", capacity_));
  }
  tokens_.copy_(tokens.view({batch_, 1}));
  torch::Tensor logits;
  if (want_graph_ && !graph_ready_) capture_graph();
#ifdef CRL_HAVE_CUDA
  if (graph_ready_) {
    graph_->graph.replay();
    logits = graph_logits_;
  }
#endif
  if (!logits.defined()) logits = decode_forward(next_slot_ + 1);
  slot_.add_(1);
  ++next_slot_;
  return logits;
}

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
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

GenerationResult generate(CausalLm& model, const std::vector<std::vector<int64_t>>& prompts,
                          const GenerationOptions& options, const TokenDecoder& decode) {
  options.validate();
  if (!options.stop_strings.empty() && !decode) {
    throw InputError("generate: stop strings need a tokenizer to decode text");
  }
  torch::NoGradGuard no_grad;
  model->eval();
  const ModelConfig& config = model->config();
  size_t longest = 0;
  for (const auto& p : prompts) longest = std::max(longest, p.size());
  const int64_t capacity = static_cast<int64_t>(longest) + options.max_new_tokens;
  if (config.rope.type == RopeType::kDynamic && capacity > config.max_position_embeddings) {
    throw InputError(fmt::format("generate: {} positions exceed max_position_embeddings {}; crl applies dynamic rope "
                                 "scaling only within that length", capacity, config.max_position_embeddings));
  }
  const torch::Device device = model->device();
  const auto long_options = torch::TensorOptions().dtype(torch::kInt64).device(device);
  GenerationResult result;
  BatchedDecoder decoder(model, prompts, capacity, options.pad_token_id, options.use_cuda_graph);
  const int64_t batch = decoder.batch();

  const torch::Tensor keys = sequence_keys(options.sampling.seed, batch, device);
  const torch::Tensor step = torch::zeros({1}, long_options);
  const torch::Tensor stop_ids = torch::tensor(options.stop_token_ids, torch::kInt64).to(device);
  const torch::Tensor pad = torch::full({batch}, options.pad_token_id, long_options);
  torch::Tensor finished = torch::zeros({batch}, long_options.dtype(torch::kBool));
  const torch::Tensor all_tokens = torch::full({batch, options.max_new_tokens}, options.pad_token_id, long_options);
  const torch::Tensor all_logprobs = torch::zeros({batch, options.max_new_tokens}, long_options.dtype(torch::kFloat32));
  const torch::Tensor all_model_logprobs = torch::zeros_like(all_logprobs);
  std::vector<bool> stopped_by_string(batch, false);

  auto start = std::chrono::steady_clock::now();
  torch::Tensor logits = decoder.prefill();
  synchronize(device);
  result.prefill_seconds = seconds_since(start);
  start = std::chrono::steady_clock::now();
  int64_t produced = 0;
  // Without stop tokens or strings every sequence runs to max_new_tokens: no host check at all.
  const bool can_stop_early = !options.stop_token_ids.empty() || !options.stop_strings.empty();
  for (int64_t t = 0; t < options.max_new_tokens; ++t) {
    const SampledTokens sampled = sample_tokens(logits, options.sampling, keys, step);
    const torch::Tensor tokens = torch::where(finished, pad, sampled.tokens);
    all_tokens.select(1, t).copy_(tokens);
    all_logprobs.select(1, t).copy_(sampled.logprobs);
    all_model_logprobs.select(1, t).copy_(sampled.model_logprobs);
    if (stop_ids.numel() > 0) finished = finished | torch::isin(tokens, stop_ids);
    step.add_(1);
    produced = t + 1;
    if (produced == options.max_new_tokens) break;
    if (can_stop_early && produced % options.sync_every == 0) {
      // One host round trip every sync_every steps: stop strings, and early exit when all are done.
      if (!options.stop_strings.empty()) {
        const torch::Tensor host_tokens = all_tokens.narrow(1, 0, produced).cpu();
        const torch::Tensor host_finished = finished.cpu();
        std::vector<bool> newly(batch, false);
        bool any = false;
        for (int64_t b = 0; b < batch; ++b) {
          if (host_finished[b].item<bool>()) continue;
          const int64_t* row = host_tokens[b].data_ptr<int64_t>();
          const std::string text = decode(std::vector<int64_t>(row, row + produced));
          for (const auto& s : options.stop_strings) {
            if (text.find(s) != std::string::npos) {
              newly[b] = true;
              any = true;
            }
          }
        }
        if (any) {
          std::vector<int64_t> flags(newly.begin(), newly.end());
          finished = finished | torch::tensor(flags, torch::kInt64).to(device).to(torch::kBool);
        }
      }
      if (finished.all().item<bool>()) break;
    }
    logits = decoder.step(tokens);
  }
  synchronize(device);
  result.decode_seconds = seconds_since(start);
  result.decode_steps = produced;
  result.used_cuda_graph = decoder.using_cuda_graph();

  const torch::Tensor host_tokens = all_tokens.narrow(1, 0, produced).cpu().contiguous();
  const torch::Tensor host_logprobs = all_logprobs.narrow(1, 0, produced).cpu().contiguous();
  const torch::Tensor host_model_logprobs = all_model_logprobs.narrow(1, 0, produced).cpu().contiguous();
  const std::set<int64_t> stop_set(options.stop_token_ids.begin(), options.stop_token_ids.end());
  for (int64_t b = 0; b < batch; ++b) {
    GeneratedSequence seq;
    const int64_t* tok = host_tokens[b].data_ptr<int64_t>();
    const float* lp = host_logprobs[b].data_ptr<float>();
    const float* mlp = host_model_logprobs[b].data_ptr<float>();
    int64_t keep = produced;
    for (int64_t i = 0; i < produced; ++i) {
      if (stop_set.contains(tok[i])) {
        keep = i + 1;
        seq.finish_reason = FinishReason::kStopToken;
        break;
      }
    }
    std::vector<int64_t> kept(tok, tok + keep);
    if (!options.stop_strings.empty()) {
      const int64_t cut = stop_string_cut(kept, options.stop_strings, decode);
      if (cut >= 0) {
        keep = cut;
        kept.resize(cut);
        seq.finish_reason = FinishReason::kStopString;
      }
    }
    seq.tokens = kept;
    seq.logprobs.assign(lp, lp + keep);
    seq.model_logprobs.assign(mlp, mlp + keep);
    if (decode) {
      seq.text = decode(seq.tokens);
      if (seq.finish_reason == FinishReason::kStopString) seq.text = cut_after_stop(seq.text, options.stop_strings);
    }
    result.sequences.push_back(std::move(seq));
  }
  return result;
}

}  // namespace crl::policy
