// crl's generation as it was before the engine (policy::generate at commit 616c346), frozen here so
// that the benchmark compares the engine against it on the same work, in the same run: the prompts
// left padded into one static batch and prefilled together, a static KV cache [B, kv_heads,
// capacity, head_dim] read over its whole capacity at every decode step, the decode forward as one
// CUDA graph, and sampling outside the graph with Gumbel noise over [B, V]. Every row decodes until
// the longest is done. Benchmark use only: tokens are not checked for stop rules.
#pragma once

#include <torch/torch.h>
#ifdef CRL_HAVE_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <algorithm>
#include <memory>
#include <vector>

#include "policy/model.h"
#include "policy/sampling.h"

namespace crl::bench {

class StaticBatchBaseline {
 public:
  StaticBatchBaseline(policy::CausalLm model, const std::vector<std::vector<int64_t>>& prompts, int64_t new_tokens)
      : model_(std::move(model)), new_tokens_(new_tokens) {
    batch_ = static_cast<int64_t>(prompts.size());
    for (const auto& p : prompts) width_ = std::max<int64_t>(width_, static_cast<int64_t>(p.size()));
    capacity_ = width_ + new_tokens;
    const auto& c = model_->config();
    const torch::Device device = model_->device();
    const auto longs = torch::TensorOptions().dtype(torch::kInt64).device(device);
    std::vector<int64_t> block(batch_ * width_, 0), pads(batch_);
    for (int64_t b = 0; b < batch_; ++b) {
      pads[b] = width_ - static_cast<int64_t>(prompts[b].size());
      std::copy(prompts[b].begin(), prompts[b].end(), block.begin() + b * width_ + pads[b]);
    }
    prompt_ids_ = torch::tensor(block, torch::kInt64).view({batch_, width_}).to(device);
    pad_counts_ = torch::tensor(pads, torch::kInt64).to(device);
    key_index_ = torch::arange(capacity_, longs);
    tokens_ = torch::zeros({batch_, 1}, longs);
    slot_ = torch::full({1}, width_, longs);
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      keys_.push_back(torch::zeros({batch_, c.num_key_value_heads, capacity_, c.head_dim}, longs.dtype(model_->dtype())));
      values_.push_back(torch::zeros_like(keys_.back()));
    }
  }

  // Prefill and new_tokens decode steps; returns the sampled tokens [B, new_tokens] (on the device).
  torch::Tensor run(uint64_t seed) {
    torch::NoGradGuard no_grad;
    const torch::Device device = model_->device();
    const auto longs = torch::TensorOptions().dtype(torch::kInt64).device(device);
    const auto bools = longs.dtype(torch::kBool);
    const torch::Tensor columns = torch::arange(width_, longs);
    const torch::Tensor positions = (columns.unsqueeze(0) - pad_counts_.unsqueeze(1)).clamp_min(0);
    const torch::Tensor causal = torch::ones({width_, width_}, bools).tril().view({1, 1, width_, width_});
    const torch::Tensor real = columns.view({1, 1, 1, width_}) >= pad_counts_.view({batch_, 1, 1, 1});
    const torch::Tensor mask = (causal & real) | torch::eye(width_, bools).view({1, 1, width_, width_});
    torch::Tensor logits = forward(prompt_ids_, positions, mask, columns, width_).select(1, width_ - 1);
    slot_.fill_(width_);
    const torch::Tensor keys = policy::sequence_keys(seed, batch_, device);
    const torch::Tensor step = torch::zeros({1}, longs);
    const torch::Tensor out = torch::zeros({batch_, new_tokens_}, longs);
    for (int64_t t = 0; t < new_tokens_; ++t) {
      const torch::Tensor tokens = gumbel_sample(logits, keys, step);
      out.select(1, t).copy_(tokens);
      step.add_(1);
      if (t + 1 == new_tokens_) break;
      tokens_.copy_(tokens.view({batch_, 1}));
#ifdef CRL_HAVE_CUDA
      if (device.is_cuda()) {
        if (!graph_) capture();
        graph_->replay();
        logits = graph_logits_;
      } else {
        logits = decode_forward(capacity_);
      }
#else
      logits = decode_forward(capacity_);
#endif
      slot_.add_(1);
    }
    return out;
  }

 private:
  static torch::Tensor rotate_half(const torch::Tensor& x) {
    const int64_t half = x.size(-1) / 2;
    return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  }

  // The old cached forward: every layer writes its keys at `slots` and attends over [0, kv_length).
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& positions, const torch::Tensor& mask,
                        const torch::Tensor& slots, int64_t kv_length) {
    const int64_t batch = ids.size(0), steps = ids.size(1);
    auto [cos, sin] = model_->rotary_tables(positions, model_->dtype());
    cos = cos.unsqueeze(1);
    sin = sin.unsqueeze(1);
    torch::Tensor h = model_->model->embed_tokens(ids);
    int64_t l = 0;
    for (const auto& module : *model_->model->layers) {
      auto layer = module->as<policy::DecoderLayer>();
      auto& attn = layer->self_attn;
      const torch::Tensor x = layer->input_layernorm(h);
      const int64_t heads = attn->heads, kv_heads = attn->kv_heads, dim = attn->head_dim, groups = heads / kv_heads;
      torch::Tensor q = attn->lora.project("q_proj", attn->q_proj, x, false).view({batch, steps, heads, dim}).transpose(1, 2);
      torch::Tensor k = attn->lora.project("k_proj", attn->k_proj, x, false).view({batch, steps, kv_heads, dim}).transpose(1, 2);
      const torch::Tensor v = attn->lora.project("v_proj", attn->v_proj, x, false).view({batch, steps, kv_heads, dim}).transpose(1, 2);
      q = q * cos + rotate_half(q) * sin;
      k = k * cos + rotate_half(k) * sin;
      keys_[l].index_copy_(2, slots, k);
      values_[l].index_copy_(2, slots, v);
      const torch::Tensor key_block = keys_[l].narrow(2, 0, kv_length);
      const torch::Tensor value_block = values_[l].narrow(2, 0, kv_length);
      torch::Tensor m = mask;
      if (groups > 1) m = m.unsqueeze(2).expand({batch, 1, groups, steps, kv_length}).reshape({batch, 1, groups * steps, kv_length});
      const torch::Tensor out = at::scaled_dot_product_attention(q.reshape({batch, kv_heads, groups * steps, dim}), key_block,
                                                                 value_block, m, 0.0, false, attn->scale)
                                    .reshape({batch, heads, steps, dim});
      h = h + attn->lora.project("o_proj", attn->o_proj, out.transpose(1, 2).reshape({batch, steps, heads * dim}), false);
      h = h + layer->mlp(layer->post_attention_layernorm(h));
      ++l;
    }
    h = model_->model->norm(h);
    return model_->lm_head ? model_->lm_head(h) : torch::nn::functional::linear(h, model_->model->embed_tokens->weight);
  }

  torch::Tensor decode_forward(int64_t kv_length) {
    const torch::Tensor positions = slot_.view({1, 1}) - pad_counts_.view({batch_, 1});
    const torch::Tensor keys = key_index_.narrow(0, 0, kv_length).view({1, 1, 1, kv_length});
    const torch::Tensor mask = (keys >= pad_counts_.view({batch_, 1, 1, 1})) & (keys <= slot_.view({1, 1, 1, 1}));
    return forward(tokens_, positions, mask, slot_, kv_length).view({batch_, -1});
  }

#ifdef CRL_HAVE_CUDA
  void capture() {
    graph_ = std::make_unique<at::cuda::CUDAGraph>();
    auto side = c10::cuda::getStreamFromPool();
    const auto main = c10::cuda::getCurrentCUDAStream();
    at::cuda::CUDAEvent before;
    before.record(main);
    before.block(side);
    {
      c10::cuda::CUDAStreamGuard guard(side);
      for (int i = 0; i < 2; ++i) decode_forward(capacity_);
      graph_->capture_begin();
      graph_logits_ = decode_forward(capacity_);
      graph_->capture_end();
    }
    at::cuda::CUDAEvent after;
    after.record(side);
    after.block(main);
  }
#endif

  // The old sampler: Gumbel-max with counter-based noise over the whole [B, V] (temperature 1).
  static torch::Tensor mix32(torch::Tensor x) {
    constexpr int64_t low = 0xFFFFFFFFLL;
    x = torch::bitwise_and(torch::bitwise_xor(x, x.__rshift__(16)) * 0x45d9f3bLL, low);
    x = torch::bitwise_and(torch::bitwise_xor(x, x.__rshift__(16)) * 0x45d9f3bLL, low);
    return torch::bitwise_xor(x, x.__rshift__(16));
  }
  static torch::Tensor gumbel_sample(const torch::Tensor& logits, const torch::Tensor& keys, const torch::Tensor& step) {
    constexpr int64_t low = 0xFFFFFFFFLL;
    const torch::Tensor log_probs = logits.to(torch::kFloat32).log_softmax(-1);
    const torch::Tensor step_key = mix32(torch::bitwise_and(keys + torch::bitwise_and(step.reshape({1}), 0x7FFFFFFFLL) * 0x9E3779B1LL, low));
    const torch::Tensor columns = torch::arange(logits.size(1), keys.options()).unsqueeze(0);
    torch::Tensor h = mix32(torch::bitwise_xor(columns, step_key.unsqueeze(1)));
    h = mix32(torch::bitwise_and(h + step_key.unsqueeze(1), low));
    const torch::Tensor uniform = (h.__rshift__(8).to(torch::kFloat32) + 0.5f) * (1.0f / 16777216.0f);
    const torch::Tensor tokens = (log_probs - torch::log(-torch::log(uniform))).argmax(-1);
    // The old path also gathered both log-probabilities per token.
    (void)log_probs.gather(-1, tokens.unsqueeze(-1));
    (void)logits.to(torch::kFloat32).log_softmax(-1).gather(-1, tokens.unsqueeze(-1));
    return tokens;
  }

  policy::CausalLm model_;
  int64_t batch_ = 0, width_ = 0, capacity_ = 0, new_tokens_ = 0;
  torch::Tensor prompt_ids_, pad_counts_, key_index_, tokens_, slot_, graph_logits_;
  std::vector<torch::Tensor> keys_, values_;
#ifdef CRL_HAVE_CUDA
  std::unique_ptr<at::cuda::CUDAGraph> graph_;
#endif
};

}  // namespace crl::bench
