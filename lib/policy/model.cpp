// The Qwen2 / Llama causal LM: modules, forward pass, state loading and random initialisation.
#include "policy/model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include <optional>
#include <set>

#include "core/error.h"
#include "policy/model_shapes.h"
#include "policy/safetensors.h"

#ifdef CRL_HAVE_CUDA
#include <c10/cuda/CUDAStream.h>

#include "policy/inference_kernels_cuda.h"
#endif

namespace crl::policy {

namespace F = torch::nn::functional;

namespace {

thread_local bool fused_kernels_on = false;

// Whether the fused kernels take these tensors: a guard is on, no autograd, CUDA, one dtype (fp32
// or bf16), contiguous.
bool use_fused(std::initializer_list<const torch::Tensor*> tensors) {
#ifdef CRL_HAVE_CUDA
  if (!fused_kernels_on || torch::GradMode::is_enabled()) return false;
  const torch::ScalarType dtype = (*tensors.begin())->scalar_type();
  if (dtype != torch::kFloat32 && dtype != torch::kBFloat16) return false;
  for (const torch::Tensor* t : tensors) {
    if (!t->is_cuda() || t->scalar_type() != dtype || !t->is_contiguous()) return false;
  }
  return true;
#else
  (void)tensors;
  return false;
#endif
}

#ifdef CRL_HAVE_CUDA
cuda::ElementType element_type(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? cuda::ElementType::bf16 : cuda::ElementType::f32;
}
cudaStream_t stream_of(const torch::Tensor& t) { return c10::cuda::getCurrentCUDAStream(t.device().index()).stream(); }
#endif

}  // namespace

FusedInferenceKernels::FusedInferenceKernels(bool on) : previous_(fused_kernels_on) { fused_kernels_on = on; }
FusedInferenceKernels::~FusedInferenceKernels() { fused_kernels_on = previous_; }
bool FusedInferenceKernels::active() { return fused_kernels_on; }

RmsNormImpl::RmsNormImpl(int64_t size, double eps_) : eps(eps_) {
  weight = register_parameter("weight", torch::ones({size}));
}

torch::Tensor RmsNormImpl::forward(const torch::Tensor& x) {
#ifdef CRL_HAVE_CUDA
  if (use_fused({&x, &weight})) {
    torch::Tensor out = torch::empty_like(x);
    cuda::rms_norm(element_type(x), x.data_ptr(), weight.data_ptr(), out.data_ptr(), x.numel() / x.size(-1), x.size(-1), eps,
                   stream_of(x));
    return out;
  }
#endif
  const auto input_dtype = x.scalar_type();
  const torch::Tensor h = x.to(torch::kFloat32);
  const torch::Tensor variance = h.pow(2).mean(-1, /*keepdim=*/true);
  return weight * (h * torch::rsqrt(variance + eps)).to(input_dtype);
}

std::pair<torch::Tensor, torch::Tensor> RmsNormImpl::add_forward(const torch::Tensor& x, const torch::Tensor& delta) {
#ifdef CRL_HAVE_CUDA
  if (use_fused({&x, &delta, &weight}) && x.sizes() == delta.sizes()) {
    torch::Tensor sum = torch::empty_like(x), out = torch::empty_like(x);
    cuda::add_rms_norm(element_type(x), x.data_ptr(), delta.data_ptr(), weight.data_ptr(), sum.data_ptr(), out.data_ptr(),
                       x.numel() / x.size(-1), x.size(-1), eps, stream_of(x));
    return {sum, out};
  }
#endif
  torch::Tensor sum = x + delta;
  return {sum, forward(sum)};
}

namespace {

// LibTorch's modules always run their random init on construction. For weights a checkpoint will
// overwrite, the module is built at size 1 and its parameters then take uninitialised storage of
// the real size (set_ keeps the registered parameter the same tensor), which skips the init's work.
torch::nn::Linear make_linear(int64_t in, int64_t out, bool bias, WeightInit init) {
  if (init == WeightInit::kLibTorchDefault) return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
  torch::nn::Linear linear(torch::nn::LinearOptions(1, 1).bias(bias));
  torch::NoGradGuard no_grad;
  linear->weight.set_(torch::empty({out, in}));
  if (bias) linear->bias.set_(torch::empty({out}));
  linear->options = torch::nn::LinearOptions(in, out).bias(bias);
  return linear;
}

torch::nn::Embedding make_embedding(int64_t count, int64_t dim, WeightInit init) {
  if (init == WeightInit::kLibTorchDefault) return torch::nn::Embedding(count, dim);
  torch::nn::Embedding embedding(1, 1);
  torch::NoGradGuard no_grad;
  embedding->weight.set_(torch::empty({count, dim}));
  embedding->options = torch::nn::EmbeddingOptions(count, dim);
  return embedding;
}

// [..., D] -> cat(-x[..., D/2:], x[..., :D/2]) (transformers' rotate_half).
torch::Tensor rotate_half(const torch::Tensor& x) {
  const int64_t half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

}  // namespace

namespace {

// Rows up to which q/k/v take the small-rows kernel (the other projections: kSmallRowsModelLimit).
#ifdef CRL_HAVE_CUDA
constexpr int64_t kQkvSmallRowsLimit = cuda::kSmallRowsQkvLimit;
#else
constexpr int64_t kQkvSmallRowsLimit = 0;  // not used: without CUDA no projection takes the kernel
#endif

#ifdef CRL_HAVE_CUDA
// The rows of x [..., k] when the small-rows kernel may project it (fused kernels on, no autograd,
// CUDA, at most max_rows rows, 0: kSmallRowsModelLimit); else 0.
int64_t small_rows_of(const torch::Tensor& x, int64_t max_rows) {
  if (!use_fused({&x}) || x.dim() < 1 || x.size(-1) < 1) return 0;
  const int64_t rows = x.numel() / x.size(-1);
  return rows >= 1 && rows <= (max_rows > 0 ? max_rows : cuda::kSmallRowsModelLimit) ? rows : 0;
}

// The kernel's segment of `linear` for x, written to `out`; nullopt where the kernel cannot read the
// weight with x (another dtype or device, another k).
std::optional<cuda::LinearSegment> segment_of(const torch::Tensor& x, const torch::nn::Linear& linear, void* out) {
  const torch::Tensor& weight = linear->weight;
  const torch::Tensor& bias = linear->bias;
  if (!use_fused({&x, &weight}) || weight.size(1) != x.size(-1) || (bias.defined() && !use_fused({&x, &bias}))) {
    return std::nullopt;
  }
  return cuda::LinearSegment{weight.data_ptr(), bias.defined() ? bias.data_ptr() : nullptr, out, weight.size(0)};
}

// x [..., k]'s projection to n features, not yet written.
torch::Tensor projection_output(const torch::Tensor& x, int64_t n) {
  std::vector<int64_t> sizes = x.sizes().vec();
  sizes.back() = n;
  return torch::empty(sizes, x.options());
}
#endif

// The projections of x [..., k] by `linears`, with their LoRA branches, the weights read in one
// launch of the small-rows kernel, where it applies (small_rows_of(x, max_rows), every weight of
// x's dtype and device, aligned); empty where it does not (the caller projects as usual).
using NamedLinear = std::pair<const char*, torch::nn::Linear*>;
std::vector<torch::Tensor> small_rows_projections(const LoraSlots& lora, const torch::Tensor& x, std::initializer_list<NamedLinear> linears,
                                                  int64_t max_rows = 0) {
#ifdef CRL_HAVE_CUDA
  const int64_t rows = small_rows_of(x, max_rows);
  if (rows == 0) return {};
  std::vector<cuda::LinearSegment> segments;
  std::vector<torch::Tensor> outputs;
  for (const auto& [name, linear] : linears) {
    outputs.push_back(projection_output(x, (*linear)->weight.size(0)));
    const auto segment = segment_of(x, *linear, outputs.back().data_ptr());
    if (!segment) return {};
    segments.push_back(*segment);
  }
  const int count = static_cast<int>(segments.size());
  if (!cuda::small_rows_linear_fits(rows, x.size(-1), x.data_ptr(), segments.data(), count)) return {};
  cuda::small_rows_linear(element_type(x), x.data_ptr(), rows, x.size(-1), segments.data(), count, stream_of(x));
  size_t i = 0;
  for (const auto& [name, linear] : linears) {
    outputs[i] = lora.with_branch(name, outputs[i], x, /*training=*/false);
    ++i;
  }
  return outputs;
#else
  (void)lora;
  (void)x;
  (void)linears;
  (void)max_rows;
  return {};
#endif
}

// silu(x gate_proj^T) * x up_proj^T from one launch of the small-rows kernel (the MLP's
// intermediate, never written), where it applies as in small_rows_projections and neither
// projection has a LoRA branch (a branch adds to the projection before the product); undefined
// where it does not.
torch::Tensor small_rows_silu_mlp(const LoraSlots& lora, const torch::Tensor& x, const torch::nn::Linear& gate_proj,
                                  const torch::nn::Linear& up_proj) {
#ifdef CRL_HAVE_CUDA
  if (lora.branches.contains("gate_proj") || lora.branches.contains("up_proj")) return {};
  const int64_t rows = small_rows_of(x, 0);
  if (rows == 0) return {};
  torch::Tensor out = projection_output(x, gate_proj->weight.size(0));
  const auto gate = segment_of(x, gate_proj, out.data_ptr());
  const auto up = segment_of(x, up_proj, nullptr);
  if (!gate || !up || gate->n != up->n) return {};
  const cuda::LinearSegment both[] = {*gate, *up};
  if (!cuda::small_rows_linear_fits(rows, x.size(-1), x.data_ptr(), both, 2)) return {};
  cuda::small_rows_gated_linear(element_type(x), x.data_ptr(), rows, x.size(-1), *gate, *up, stream_of(x));
  return out;
#else
  (void)lora;
  (void)x;
  (void)gate_proj;
  (void)up_proj;
  return {};
#endif
}

// Row b of [B, 1, 1, K] is true for keys 0 .. lengths[b]-1.
torch::Tensor mask_from_lengths(const torch::Tensor& lengths, int64_t key_count) {
  const torch::Tensor key_index = torch::arange(key_count, lengths.options()).view({1, 1, 1, key_count});
  return key_index < lengths.view({-1, 1, 1, 1});
}

bool is_contiguous_cuda_int64(const torch::Tensor& t) {
  return t.defined() && t.is_cuda() && t.scalar_type() == torch::kInt64 && t.is_contiguous();
}

}  // namespace

torch::Tensor LoraSlots::project(const std::string& name, torch::nn::Linear& linear, const torch::Tensor& x,
                                 bool training) const {
  return with_branch(name, linear(x), x, training);
}

torch::Tensor LoraSlots::with_branch(const std::string& name, const torch::Tensor& y, const torch::Tensor& x, bool training) const {
  if (branches.empty()) return y;
  const auto it = branches.find(name);
  if (it == branches.end()) return y;
  const LoraBranch& branch = *it->second;
  const torch::Tensor in = branch.dropout > 0 && training ? F::dropout(x, F::DropoutFuncOptions().p(branch.dropout).training(true)) : x;
  return y + F::linear(F::linear(in, branch.a), branch.b) * branch.scale;
}

AttentionImpl::AttentionImpl(const ModelConfig& config, int64_t layer, WeightInit init)
    : layer_index(layer),
      heads(config.num_attention_heads),
      kv_heads(config.num_key_value_heads),
      head_dim(config.head_dim),
      scale(1.0 / std::sqrt(static_cast<double>(config.head_dim))) {
  q_proj = register_module("q_proj", make_linear(config.hidden_size, heads * head_dim, config.attention_bias, init));
  k_proj = register_module("k_proj", make_linear(config.hidden_size, kv_heads * head_dim, config.attention_bias, init));
  v_proj = register_module("v_proj", make_linear(config.hidden_size, kv_heads * head_dim, config.attention_bias, init));
  o_proj = register_module("o_proj", make_linear(heads * head_dim, config.hidden_size, config.attention_output_bias, init));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const AttentionInputs& in) {
  const int64_t batch = x.size(0);
  const int64_t steps = x.size(1);
  const bool training = is_training();
  torch::Tensor q, k, v;  // [B, S, heads * head_dim], [B, S, kv_heads * head_dim] twice
  if (auto p = small_rows_projections(lora, x, {{"q_proj", &q_proj}, {"k_proj", &k_proj}, {"v_proj", &v_proj}},
                                        kQkvSmallRowsLimit);
      !p.empty()) {
    q = p[0], k = p[1], v = p[2];
  } else {
    q = lora.project("q_proj", q_proj, x, training);
    k = lora.project("k_proj", k_proj, x, training);
    v = lora.project("v_proj", v_proj, x, training);
  }
  const auto project_out = [&](const torch::Tensor& merged) {
    if (auto p = small_rows_projections(lora, merged, {{"o_proj", &o_proj}}); !p.empty()) return p[0];
    return lora.project("o_proj", o_proj, merged, training);
  };
  bool cache_written = false;  // this step's keys and values are in the cache already
#ifdef CRL_HAVE_CUDA
  if (use_fused({&q, &k, &v, &in.cos, &in.sin}) && in.cos.size(0) == batch && in.cos.size(1) == steps &&
      in.cos.sizes() == in.sin.sizes()) {
    // Rotated in [B, S, heads, D] layout, before the transpose; with a cache, the rotated keys and
    // the values go to their slots in the same kernel.
    torch::Tensor q_rotated = torch::empty_like(q), k_rotated = torch::empty_like(k);
    torch::Tensor cache_k, cache_v;
    if (in.cache != nullptr) {
      cache_k = in.cache->keys[layer_index];
      cache_v = in.cache->values[layer_index];
    }
    cache_written = in.cache != nullptr && use_fused({&q, &cache_k, &cache_v}) && is_contiguous_cuda_int64(in.cache_slots) &&
                    in.cache_slots.numel() == batch * steps;
    cuda::rotary_qkv(element_type(q), q.data_ptr(), k.data_ptr(), v.data_ptr(), in.cos.data_ptr(), in.sin.data_ptr(),
                     q_rotated.data_ptr(), k_rotated.data_ptr(), cache_written ? in.cache_slots.data_ptr<int64_t>() : nullptr,
                     cache_written ? cache_k.data_ptr() : nullptr, cache_written ? cache_v.data_ptr() : nullptr, batch * steps,
                     heads, kv_heads, head_dim, stream_of(q));
    if (cache_written && steps == 1 && !in.mask.defined() && is_contiguous_cuda_int64(in.key_lengths) &&
        is_contiguous_cuda_int64(in.block_tables) && in.key_lengths.numel() == batch &&
        cuda::paged_attention_fits(heads, kv_heads, head_dim)) {
      // One decode step: attention straight from the cache's blocks (no gathered copy, no mask).
      const int64_t blocks = in.block_tables.size(1);
      const int64_t block_size = in.cache->block_size;
      torch::Tensor out = torch::empty_like(q_rotated);  // [B, 1, heads * head_dim]
      torch::Tensor workspace = torch::empty({cuda::paged_attention_workspace_floats(batch, heads, head_dim, blocks * block_size)},
                                             q.options().dtype(torch::kFloat32));
      cuda::paged_decode_attention(element_type(q), q_rotated.data_ptr(), cache_k.data_ptr(), cache_v.data_ptr(),
                                   in.block_tables.data_ptr<int64_t>(), in.key_lengths.data_ptr<int64_t>(), out.data_ptr(),
                                   workspace.data_ptr<float>(), batch, heads, kv_heads, head_dim, blocks, block_size,
                                   static_cast<float>(scale), stream_of(q));
      return project_out(out);
    }
    q = q_rotated.view({batch, steps, heads, head_dim}).transpose(1, 2);
    k = k_rotated.view({batch, steps, kv_heads, head_dim}).transpose(1, 2);
  } else
#endif
  {
    q = q.view({batch, steps, heads, head_dim}).transpose(1, 2);
    k = k.view({batch, steps, kv_heads, head_dim}).transpose(1, 2);
    const torch::Tensor cos = in.cos.unsqueeze(1);
    const torch::Tensor sin = in.sin.unsqueeze(1);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
  }
  v = v.view({batch, steps, kv_heads, head_dim}).transpose(1, 2);
  torch::Tensor keys = k;
  torch::Tensor values = v;
  if (in.cache != nullptr) {
    torch::Tensor& cache_k = in.cache->keys[layer_index];
    torch::Tensor& cache_v = in.cache->values[layer_index];
    const int64_t rows = batch * steps;
    if (!cache_written) {
      cache_k.index_copy_(0, in.cache_slots, k.transpose(1, 2).reshape({rows, kv_heads, head_dim}));
      cache_v.index_copy_(0, in.cache_slots, v.transpose(1, 2).reshape({rows, kv_heads, head_dim}));
    }
    if (in.block_tables.defined()) {
      // The sequence's blocks in token order: [B, NB * block_size, kv_heads, head_dim], read as
      // [B, kv_heads, K, head_dim]. Only the listed blocks are read, so a step costs the used length.
      const int64_t block_size = in.cache->block_size;
      const int64_t key_count = in.block_tables.size(1) * block_size;
      const torch::Tensor flat = in.block_tables.reshape({-1});
      const auto gather = [&](const torch::Tensor& pool) {
        return pool.view({in.cache->num_blocks, block_size, kv_heads, head_dim})
            .index_select(0, flat)
            .view({batch, key_count, kv_heads, head_dim})
            .transpose(1, 2);
      };
      keys = gather(cache_k);
      values = gather(cache_v);
    }
  }
  // Query head h uses kv head h / G (G = groups), as transformers' repeat_kv does.
  const int64_t groups = heads / kv_heads;
  const int64_t key_count = keys.size(2);
  torch::Tensor mask = in.mask;  // [B, 1, S, K]
  if (!mask.defined() && in.key_lengths.defined() && in.block_tables.defined()) mask = mask_from_lengths(in.key_lengths, key_count);
  torch::Tensor out;
  if (!mask.defined()) {
    // Plain causal over whole sequences (training, scoring): the fused causal kernels handle GQA
    // themselves, and take no mask (an explicit one forces a slower kernel).
    out = at::scaled_dot_product_attention(q, keys, values, {}, 0.0, /*is_causal=*/true, scale, /*enable_gqa=*/groups > 1);
  } else {
    // With a mask, GQA without copying keys: the G query heads that share a kv head become G*S
    // query rows of that head, and the mask is repeated for them.
    // One query step (decoding): the G rows of a kv head share the mask row, which broadcasts.
    if (groups > 1 && steps > 1) {
      mask = mask.unsqueeze(2).expand({batch, 1, groups, steps, key_count}).reshape({batch, 1, groups * steps, key_count});
    }
    const torch::Tensor grouped_q = q.reshape({batch, kv_heads, groups * steps, head_dim});
    out = at::scaled_dot_product_attention(grouped_q, keys, values, mask, 0.0, false, scale).reshape({batch, heads, steps, head_dim});
  }
  return project_out(out.transpose(1, 2).reshape({batch, steps, heads * head_dim}));
}

MlpImpl::MlpImpl(const ModelConfig& config, WeightInit init) {
  gate_proj = register_module("gate_proj", make_linear(config.hidden_size, config.intermediate_size, config.mlp_bias, init));
  up_proj = register_module("up_proj", make_linear(config.hidden_size, config.intermediate_size, config.mlp_bias, init));
  down_proj = register_module("down_proj", make_linear(config.intermediate_size, config.hidden_size, config.mlp_bias, init));
}

torch::Tensor MlpImpl::forward(const torch::Tensor& x) {
  const bool training = is_training();
  const auto project_down = [&](const torch::Tensor& hidden) {
    if (auto p = small_rows_projections(lora, hidden, {{"down_proj", &down_proj}}); !p.empty()) return p[0];
    return lora.project("down_proj", down_proj, hidden, training);
  };
  // silu(gate) * up written by the gate and up projections' kernel itself, where it can.
  if (const torch::Tensor hidden = small_rows_silu_mlp(lora, x, gate_proj, up_proj); hidden.defined()) return project_down(hidden);
  torch::Tensor gate, up;
  if (auto p = small_rows_projections(lora, x, {{"gate_proj", &gate_proj}, {"up_proj", &up_proj}}); !p.empty()) {
    gate = p[0], up = p[1];
  } else {
    gate = lora.project("gate_proj", gate_proj, x, training);
    up = lora.project("up_proj", up_proj, x, training);
  }
#ifdef CRL_HAVE_CUDA
  if (use_fused({&gate, &up})) {
    torch::Tensor hidden = torch::empty_like(gate);
    cuda::silu_mul(element_type(gate), gate.data_ptr(), up.data_ptr(), hidden.data_ptr(), gate.numel(), stream_of(gate));
    return project_down(hidden);
  }
#endif
  return project_down(F::silu(gate) * up);
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& config, int64_t layer_index, WeightInit init) {
  input_layernorm = register_module("input_layernorm", RmsNorm(config.hidden_size, config.rms_norm_eps));
  self_attn = register_module("self_attn", Attention(config, layer_index, init));
  post_attention_layernorm = register_module("post_attention_layernorm", RmsNorm(config.hidden_size, config.rms_norm_eps));
  mlp = register_module("mlp", Mlp(config, init));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const AttentionInputs& in) {
  const torch::Tensor h = x + self_attn(input_layernorm(x), in);
  return h + mlp(post_attention_layernorm(h));
}

DecoderImpl::DecoderImpl(const ModelConfig& config, WeightInit init) {
  embed_tokens = register_module("embed_tokens", make_embedding(config.vocab_size, config.hidden_size, init));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) layers->push_back(DecoderLayer(config, i, init));
  norm = register_module("norm", RmsNorm(config.hidden_size, config.rms_norm_eps));
}

CausalLmImpl::CausalLmImpl(const ModelConfig& config, WeightInit init) : config_(config) {
  config_.validate("model config");
  model = register_module("model", Decoder(config_, init));
  if (!config_.tie_word_embeddings) {
    lm_head = register_module("lm_head", make_linear(config_.hidden_size, config_.vocab_size, false, init));
  }
  const RopeFrequencies rope = rope_frequencies(config_);
  attention_scaling_ = rope.attention_scaling;
  inv_freq = torch::tensor(rope.inv_freq, torch::kFloat32);
}

torch::ScalarType CausalLmImpl::dtype() const { return model->embed_tokens->weight.scalar_type(); }
torch::Device CausalLmImpl::device() const { return model->embed_tokens->weight.device(); }

std::pair<torch::Tensor, torch::Tensor> CausalLmImpl::rotary_tables(const torch::Tensor& position_ids,
                                                                    torch::ScalarType dtype) const {
  // [B, S, 1] * [D/2] in fp32: each element one product, as transformers' K=1 matmul computes it.
  if (!inv_freq_on_device_.defined() || inv_freq_on_device_.device() != position_ids.device()) {
    inv_freq_on_device_ = inv_freq.to(position_ids.device());  // once per device, before any graph capture
  }
  const torch::Tensor freqs = position_ids.to(torch::kFloat32).unsqueeze(-1) * inv_freq_on_device_;
  const torch::Tensor emb = torch::cat({freqs, freqs}, -1);
  torch::Tensor cos = emb.cos();
  torch::Tensor sin = emb.sin();
  if (attention_scaling_ != 1.0) {
    cos = cos * attention_scaling_;
    sin = sin * attention_scaling_;
  }
  return {cos.to(dtype), sin.to(dtype)};
}

torch::Tensor CausalLmImpl::forward(const torch::Tensor& input_ids) {
  ForwardInputs in;
  in.input_ids = input_ids;
  return forward(in);
}

AttentionInputs CausalLmImpl::full_pass_inputs(const ForwardInputs& in) const {
  const int64_t batch = in.input_ids.size(0);
  const int64_t steps = in.input_ids.size(1);
  const auto device = in.input_ids.device();
  torch::Tensor position_ids = in.position_ids;
  if (!position_ids.defined()) {
    if (in.padding_mask.defined()) {
      // Left padding: real tokens count positions from 0, as transformers' cumsum(mask) - 1.
      position_ids = (in.padding_mask.to(torch::kInt64).cumsum(1) - 1).clamp_min(0);
    } else {
      position_ids = torch::arange(steps, torch::TensorOptions().dtype(torch::kInt64).device(device)).unsqueeze(0).expand({batch, steps});
    }
  }
  AttentionInputs attn;
  std::tie(attn.cos, attn.sin) = rotary_tables(position_ids, dtype());
  if (in.attention_mask.defined()) {
    attn.mask = in.attention_mask;
  } else if (in.padding_mask.defined()) {
    const auto bool_options = torch::TensorOptions().dtype(torch::kBool).device(device);
    const torch::Tensor causal = torch::ones({steps, steps}, bool_options).tril().view({1, 1, steps, steps});
    const torch::Tensor keys_real = in.padding_mask.to(torch::kBool).view({batch, 1, 1, steps});
    // A padding query row would see no key at all (SDPA gives NaN); let it see itself instead.
    const torch::Tensor self = torch::eye(steps, bool_options).view({1, 1, steps, steps});
    attn.mask = (causal & keys_real) | self;
  }
  return attn;
}

torch::Tensor CausalLmImpl::forward(const ForwardInputs& in) {
  if (!in.input_ids.defined() || in.input_ids.dim() != 2) {
    throw InputError("CausalLm::forward: input_ids must be a [batch, steps] int64 tensor");
  }
  const int64_t steps = in.input_ids.size(1);
  AttentionInputs attn;
  if (in.cache == nullptr) {
    attn = full_pass_inputs(in);
  } else {
    const bool attends_blocks = in.attention_mask.defined() || in.key_lengths.defined();
    if (!in.position_ids.defined() || !in.cache_slots.defined() || in.block_tables.defined() != attends_blocks ||
        (in.attention_mask.defined() && in.key_lengths.defined())) {
      throw InputError("CausalLm::forward: a cached pass needs position_ids and cache_slots, and block_tables with attention_mask "
                       "or key_lengths (one of them), or none of the three");
    }
    if (in.key_lengths.defined() && (steps != 1 || in.key_lengths.dim() != 1 || in.key_lengths.size(0) != in.input_ids.size(0))) {
      throw InputError("CausalLm::forward: key_lengths is for one decode step: [batch] lengths with input_ids [batch, 1]");
    }
    std::tie(attn.cos, attn.sin) = rotary_tables(in.position_ids, dtype());
    attn.mask = in.attention_mask;
    attn.cache = in.cache;
    attn.cache_slots = in.cache_slots;
    attn.block_tables = in.block_tables;
    attn.key_lengths = in.key_lengths;
  }
  torch::Tensor h = model->embed_tokens(in.input_ids);
  if (FusedInferenceKernels::active() && !torch::GradMode::is_enabled()) {
#ifdef CRL_HAVE_CUDA
    const cuda::ProgrammaticLaunchScope early_start(in.input_ids.numel() <= cuda::kSmallRowsModelLimit);
#endif
    // The layers' ops in the same order, each residual add joined with the RMSNorm after it (the
    // layer's post-attention norm, the next layer's input norm, the final norm): one kernel each.
    const auto& layers = *model->layers;
    torch::Tensor normed = layers[0]->as<DecoderLayer>()->input_layernorm(h);
    for (size_t i = 0; i < layers.size(); ++i) {
      const auto& layer = layers[i]->as<DecoderLayer>();
      const auto [mid, mid_normed] = layer->post_attention_layernorm->add_forward(h, layer->self_attn(normed, attn));
      RmsNorm& next = i + 1 < layers.size() ? layers[i + 1]->as<DecoderLayer>()->input_layernorm : model->norm;
      std::tie(h, normed) = next->add_forward(mid, layer->mlp(mid_normed));
    }
    h = in.last_position_only ? normed.narrow(1, steps - 1, 1) : normed;  // the norm is per position
  } else {
    for (const auto& layer : *model->layers) h = layer->as<DecoderLayer>()->forward(h, attn);
    if (in.last_position_only) h = h.narrow(1, steps - 1, 1);
    h = model->norm(h);
  }
  if (lm_head) return lm_head(h);
  return F::linear(h, model->embed_tokens->weight);
}

void load_state(CausalLm& model, const std::map<std::string, torch::Tensor>& tensors, const std::string& origin) {
  torch::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& item : model->named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    torch::Tensor& param = item.value();
    const auto it = tensors.find(name);
    if (it == tensors.end()) {
      throw InputError(fmt::format("{}: tensor \"{}\" is missing (the config's architecture needs it)", origin, name));
    }
    const torch::Tensor& source = it->second;
    if (source.sizes() != param.sizes()) {
      throw InputError(fmt::format("{}: tensor \"{}\" has shape {} but the config needs {}", origin, name,
                                   fmt::join(source.sizes(), "x"), fmt::join(param.sizes(), "x")));
    }
    if (!source.is_floating_point()) {
      throw InputError(fmt::format("{}: tensor \"{}\" has dtype {}; a floating-point dtype is needed", origin, name,
                                   std::string(c10::toString(source.scalar_type()))));
    }
    param.copy_(source);
    used.insert(name);
  }
  for (const auto& [name, tensor] : tensors) {
    if (used.contains(name)) continue;
    if (name.ends_with("rotary_emb.inv_freq")) continue;  // older checkpoints saved the (recomputed) buffer
    if (name == "lm_head.weight" && model->config().tie_word_embeddings) {
      const torch::Tensor& embed = model->model->embed_tokens->weight;
      if (tensor.sizes() != embed.sizes() || !torch::equal(tensor.to(embed.device(), embed.scalar_type()), embed)) {
        throw InputError(fmt::format("{}: tensor \"lm_head.weight\" differs from model.embed_tokens.weight, but "
                                     "config.json says tie_word_embeddings", origin));
      }
      continue;
    }
    throw InputError(fmt::format("{}: tensor \"{}\" is not part of this architecture (check config.json)", origin, name));
  }
}

std::vector<std::pair<std::string, torch::Tensor>> state_tensors(const CausalLm& model) {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : model->named_parameters(true)) out.emplace_back(item.key(), item.value());
  return out;
}

torch::ScalarType parse_dtype(const std::string& name) {
  if (name == "fp32" || name == "float32") return torch::kFloat32;
  if (name == "bf16" || name == "bfloat16") return torch::kBFloat16;
  if (name == "fp16" || name == "float16") return torch::kFloat16;
  throw InputError(fmt::format("dtype \"{}\" is not one of fp32, bf16, fp16", name));
}

torch::Device parse_device(const std::string& name) {
  try {
    torch::Device device(name);
    if (device.is_cuda() && !torch::cuda::is_available()) {
      throw InputError(fmt::format("device \"{}\": this machine has no CUDA device (crl doctor says more)", name));
    }
    if (!device.is_cpu() && !device.is_cuda()) throw InputError(fmt::format("device \"{}\": expected cpu or cuda[:N]", name));
    return device;
  } catch (const c10::Error&) {
    throw InputError(fmt::format("device \"{}\": expected cpu or cuda[:N]", name));
  }
}

namespace {

void check_weights(const ModelConfig& config, const SafetensorsCheckpoint& checkpoint, const std::filesystem::path& dir) {
  std::vector<SafetensorsEntry> entries;
  for (const auto& name : checkpoint.names()) entries.push_back(checkpoint.entry(name));
  check_checkpoint_shapes(config, entries, dir.string());
}

}  // namespace

ModelConfig check_model_weights(const std::filesystem::path& dir) {
  ModelConfig config = load_model_config(dir);
  check_weights(config, SafetensorsCheckpoint(dir), dir);
  return config;
}

CausalLm load_causal_lm(const std::filesystem::path& dir, torch::ScalarType dtype, torch::Device device) {
  const ModelConfig config = load_model_config(dir);
  const SafetensorsCheckpoint checkpoint(dir);
  // The shapes first: a config whose sizes the checkpoint does not hold must not allocate a model.
  check_weights(config, checkpoint, dir);
  CausalLm model(config, WeightInit::kUninitialised);  // every weight comes from the checkpoint
  model->eval();
  load_state(model, checkpoint.load_all(), dir.string());
  model->to(device, dtype);
  return model;
}

void init_weights(CausalLm& model, uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double std_dev = model->config().initializer_range > 0 ? model->config().initializer_range : 0.02;
  for (auto& item : model->named_parameters(true)) {
    const std::string& name = item.key();
    torch::Tensor& p = item.value();
    torch::Tensor value;
    if (name.ends_with("norm.weight")) {
      value = torch::ones(p.sizes());
    } else if (name.ends_with(".bias")) {
      value = torch::zeros(p.sizes());
    } else {
      value = at::normal(0.0, std_dev, p.sizes(), generator);
    }
    p.copy_(value);
  }
  if (const auto pad = model->config().pad_token_id) model->model->embed_tokens->weight[*pad].zero_();
}

}  // namespace crl::policy
