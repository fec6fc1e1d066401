// The Qwen2 / Llama causal language model in LibTorch: RMSNorm, rotary embeddings, grouped-query
// attention, SwiGLU MLP, tied or untied embeddings, biases as the config says; fp32/bf16, CPU/CUDA.
//
// Parameter names equal Hugging Face's (model.embed_tokens.weight,
// model.layers.N.self_attn.q_proj.weight, ..., model.norm.weight, lm_head.weight when untied), so a
// state dict moves 1:1 through safetensors. The arithmetic follows transformers' modeling_qwen2 /
// modeling_llama step by step (norms in fp32, rotary tables in fp32 cast to the model dtype,
// scaled-dot-product attention with scale head_dim^-0.5), which is what keeps fp32 logits within
// 1e-4 relative error of transformers on the same weights.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <filesystem>
#include <map>
#include <string>

#include "policy/config.h"
#include "policy/kv_cache.h"

namespace crl::policy {

// How a new model's weights start: as LibTorch's modules initialise them, or allocated and left
// unset because a checkpoint is about to overwrite every one (no work spent on a random init).
enum class WeightInit { kLibTorchDefault, kUninitialised };

// While one of these is alive on a thread with its argument true, that thread's forwards without
// autograd on CUDA fp32/bf16 tensors run RMSNorm, the rotary embedding and SiLU-and-multiply as
// fused kernels (inference_kernels_cuda.h: one launch each instead of 3 to 8, rounding as the ATen
// ops do). Training forwards (autograd on) never use them. The generation engine sets it.
class FusedInferenceKernels {
 public:
  explicit FusedInferenceKernels(bool on);
  ~FusedInferenceKernels();
  FusedInferenceKernels(const FusedInferenceKernels&) = delete;
  FusedInferenceKernels& operator=(const FusedInferenceKernels&) = delete;
  static bool active();  // on this thread

 private:
  bool previous_;
};

// x * rsqrt(mean(x^2) + eps) in fp32, cast back, times the weight (transformers' Qwen2RMSNorm).
struct RmsNormImpl : torch::nn::Module {
  RmsNormImpl(int64_t size, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  // {x + delta, forward(x + delta)}: a residual add and the norm after it (one kernel with
  // FusedInferenceKernels on CUDA; the same two ops otherwise).
  std::pair<torch::Tensor, torch::Tensor> add_forward(const torch::Tensor& x, const torch::Tensor& delta);
  torch::Tensor weight;
  double eps;
};
TORCH_MODULE(RmsNorm);

// Where a forward pass reads and writes: the paged cache (if any), the slots of this step's tokens
// in it, the blocks the attention reads, and which of their slots each query may see.
struct AttentionInputs {
  torch::Tensor cos, sin;          // [B, S, head_dim] rotary tables in the model dtype
  torch::Tensor mask;              // [B, 1, S, K] bool, true = may attend; K keys (cache slots or S).
                                   // Undefined: plain causal over this step's keys, the fused kernel's case
  PagedKvCache* cache = nullptr;   // null: attend over this step's keys only
  torch::Tensor cache_slots;       // [B * S] int64: flat cache slot of each of this step's tokens
  torch::Tensor block_tables;      // [B, NB] int64: blocks read (K = NB * block_size); undefined: none
  torch::Tensor key_lengths;       // [B] int64 with block_tables and no mask: row b sees its keys 0 .. key_lengths[b]-1
};

// A LoRA branch beside a linear layer: y = linear(x) + scale * B(A(dropout(x))). Owned by
// LoraAdapters (lora.h), which attaches it to the layer's LoraSlots.
struct LoraBranch {
  torch::Tensor a;  // [rank, in]
  torch::Tensor b;  // [out, rank]
  double scale = 1.0;
  double dropout = 0.0;  // on the branch's input, in training mode only
};

// The projections of an attention or MLP module that carry a LoRA branch, by projection name
// ("q_proj", ...). Empty for a plain model, whose projections are then plain linear layers.
struct LoraSlots {
  std::map<std::string, const LoraBranch*> branches;
  torch::Tensor project(const std::string& name, torch::nn::Linear& linear, const torch::Tensor& x, bool training) const;
  // y (the layer's own output for x) plus the branch `name`'s, if one is attached.
  torch::Tensor with_branch(const std::string& name, const torch::Tensor& y, const torch::Tensor& x, bool training) const;
};

struct AttentionImpl : torch::nn::Module {
  AttentionImpl(const ModelConfig& config, int64_t layer_index, WeightInit init = WeightInit::kLibTorchDefault);
  torch::Tensor forward(const torch::Tensor& x, const AttentionInputs& in);
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};
  LoraSlots lora;
  int64_t layer_index, heads, kv_heads, head_dim;
  double scale;
};
TORCH_MODULE(Attention);

struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(const ModelConfig& config, WeightInit init = WeightInit::kLibTorchDefault);
  torch::Tensor forward(const torch::Tensor& x);  // down(silu(gate(x)) * up(x))
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};
  LoraSlots lora;
};
TORCH_MODULE(Mlp);

struct DecoderLayerImpl : torch::nn::Module {
  DecoderLayerImpl(const ModelConfig& config, int64_t layer_index, WeightInit init = WeightInit::kLibTorchDefault);
  torch::Tensor forward(const torch::Tensor& x, const AttentionInputs& in);
  RmsNorm input_layernorm{nullptr};
  Attention self_attn{nullptr};
  RmsNorm post_attention_layernorm{nullptr};
  Mlp mlp{nullptr};
};
TORCH_MODULE(DecoderLayer);

// The decoder stack, registered as "model" so names carry transformers' "model." prefix.
struct DecoderImpl : torch::nn::Module {
  explicit DecoderImpl(const ModelConfig& config, WeightInit init = WeightInit::kLibTorchDefault);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RmsNorm norm{nullptr};
};
TORCH_MODULE(Decoder);

// One forward pass. Without a cache: positions default to 0..S-1 and the mask to causal (plus
// `padding_mask` if given). With a cache the caller gives positions and slots; then either
// block_tables with attention_mask or key_lengths (a decode step: attention over the listed blocks), or neither (the
// prefill of a prompt with nothing cached before it: causal over this step's keys).
struct ForwardInputs {
  torch::Tensor input_ids;      // [B, S] int64
  torch::Tensor position_ids;   // [B, S] int64 rotary positions; undefined: 0..S-1 for every row
  torch::Tensor attention_mask; // [B, 1, S, K] bool; with a cache: K = NB * block_size, slot order of block_tables
  torch::Tensor padding_mask;   // [B, S] bool/int, 1 = real token (no cache only). Needed for left
                                // padding; right-padded rows can leave it undefined (causal attention
                                // never looks right), which keeps the fused causal kernel
  PagedKvCache* cache = nullptr;
  torch::Tensor cache_slots;    // [B * S] int64 flat slots (kv_cache.h) where this step's keys go
  torch::Tensor block_tables;   // [B, NB] int64 blocks the attention reads
  torch::Tensor key_lengths;    // [B] int64, instead of attention_mask for one decode step over block_tables:
                                // row b sees its slots 0 .. key_lengths[b]-1 (the paged decode kernel's input)
  bool last_position_only = false;  // logits only for column S-1 (prefill: saves a [B,S,V] tensor)
};

struct CausalLmImpl : torch::nn::Module {
  explicit CausalLmImpl(const ModelConfig& config, WeightInit init = WeightInit::kLibTorchDefault);

  // Logits [B, S, V] (or [B, 1, V] with last_position_only), in the model dtype.
  torch::Tensor forward(const ForwardInputs& in);
  // Full causal pass over `input_ids` [B, S] with no cache.
  torch::Tensor forward(const torch::Tensor& input_ids);

  // Positions, rotary tables and attention mask of a pass over whole sequences without a cache
  // (in.cache must be null). The mask stays undefined (plain causal: SDPA's fused causal kernels,
  // GQA without copies) unless in.attention_mask or in.padding_mask asks for more.
  AttentionInputs full_pass_inputs(const ForwardInputs& in) const;

  // Rotary cos/sin [B, S, head_dim] for `position_ids` [B, S], computed in fp32 as transformers
  // does (positions times inverse frequencies, cos/sin, times the attention scaling), then cast.
  std::pair<torch::Tensor, torch::Tensor> rotary_tables(const torch::Tensor& position_ids, torch::ScalarType dtype) const;

  const ModelConfig& config() const { return config_; }
  torch::ScalarType dtype() const;
  torch::Device device() const;

  Decoder model{nullptr};
  torch::nn::Linear lm_head{nullptr};  // null when tie_word_embeddings: logits use embed_tokens
  // [head_dim/2] fp32 on the CPU; not a registered buffer, so module.to(dtype) never rounds it
  // (transformers keeps it fp32 too) and it is never saved.
  torch::Tensor inv_freq;

 private:
  ModelConfig config_;
  mutable torch::Tensor inv_freq_on_device_;
  double attention_scaling_ = 1.0;
};
TORCH_MODULE(CausalLm);

// Copies `tensors` into the model's parameters, converting dtype and device. Every parameter must
// be present with its exact shape; names the model does not have are refused, except lm_head.weight
// of a tied model (it must equal the embedding) and the rotary inv_freq buffers older checkpoints
// carry. Errors name `origin` and the tensor.
void load_state(CausalLm& model, const std::map<std::string, torch::Tensor>& tensors, const std::string& origin);

// The parameters by their Hugging Face names (what save_pretrained writes: no lm_head when tied).
std::vector<std::pair<std::string, torch::Tensor>> state_tensors(const CausalLm& model);

torch::ScalarType parse_dtype(const std::string& name);  // "fp32"/"float32", "bf16"/"bfloat16", "fp16"/"float16"
torch::Device parse_device(const std::string& name);     // "cpu", "cuda", "cuda:N"

// What load_causal_lm reads, checked without reading a tensor or allocating the model: DIR/config.json
// whole, and the headers of DIR's safetensors weights against the parameters it implies. Returns the
// config; InputError (or IoError) naming the file otherwise.
ModelConfig check_model_weights(const std::filesystem::path& dir);

// Loads DIR/config.json and DIR's safetensors weights into a model on `device` in `dtype`.
CausalLm load_causal_lm(const std::filesystem::path& dir, torch::ScalarType dtype, torch::Device device);

// Random initialisation as transformers does: linear and embedding weights ~ normal(0,
// initializer_range), biases zero, norm weights one; deterministic from `seed` (CPU generator).
void init_weights(CausalLm& model, uint64_t seed);

}  // namespace crl::policy
