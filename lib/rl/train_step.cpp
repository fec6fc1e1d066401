// Policy training step and per-layer activation checkpointing (see train_step.h).
#include "rl/train_step.h"

#include <torch/torch.h>

#include <fmt/format.h>

#include "core/error.h"

namespace crl::rl {

using policy::AttentionInputs;
using policy::CausalLm;
using policy::DecoderLayer;
using policy::DecoderLayerImpl;
using policy::ForwardInputs;
using policy::LoraAdapters;
using policy::LoraSlots;
using policy::RmsNormImpl;

namespace {

// The tensors a decoder layer computes with that need gradients: its linear weights and biases
// and norm weights for full fine-tuning; the A and B of its attached LoRA branches otherwise.
std::vector<torch::Tensor> layer_weights(DecoderLayerImpl& layer) {
  std::vector<torch::Tensor> out;
  const auto add = [&](const torch::Tensor& t) {
    if (t.defined() && t.requires_grad()) out.push_back(t);
  };
  for (const auto& module : layer.modules(/*include_self=*/false)) {
    if (auto* linear = dynamic_cast<torch::nn::LinearImpl*>(module.get())) {
      add(linear->weight);
      add(linear->bias);
    } else if (auto* norm = dynamic_cast<RmsNormImpl*>(module.get())) {
      add(norm->weight);
    }
  }
  for (const LoraSlots* slots : {&layer.self_attn->lora, &layer.mlp->lora}) {
    for (const auto& [name, branch] : slots->branches) {
      add(branch->a);
      add(branch->b);
    }
  }
  return out;
}

// Whether a layer draws random numbers in its forward (LoRA dropout in training mode): its
// recomputation in backward must then see the generator state its forward saw.
bool layer_draws_randomness(DecoderLayerImpl& layer) {
  if (!layer.is_training()) return false;
  for (const LoraSlots* slots : {&layer.self_attn->lora, &layer.mlp->lora}) {
    for (const auto& [name, branch] : slots->branches) {
      if (branch->dropout > 0) return true;
    }
  }
  return false;
}

// Runs a decoder layer without keeping its activations; backward re-runs it with grad enabled
// and returns the gradients for the hidden state and for the layer's weights.
struct CheckpointedLayer : torch::autograd::Function<CheckpointedLayer> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& hidden,
                               at::TensorList weights, DecoderLayerImpl* layer, const AttentionInputs* inputs) {
    std::vector<torch::Tensor> saved{hidden};
    saved.insert(saved.end(), weights.begin(), weights.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["layer"] = reinterpret_cast<int64_t>(layer);
    ctx->saved_data["cos"] = inputs->cos;
    ctx->saved_data["sin"] = inputs->sin;
    ctx->saved_data["mask"] = inputs->mask;
    if (layer_draws_randomness(*layer)) {
      // As torch.utils.checkpoint: the generator state before forward, restored for the recompute.
      at::Generator gen = at::globalContext().defaultGenerator(hidden.device());
      std::lock_guard<std::mutex> lock(gen.mutex());
      ctx->saved_data["rng_state"] = gen.get_state();
    }
    torch::NoGradGuard no_grad;
    return layer->forward(hidden, *inputs);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    AttentionInputs inputs;
    inputs.cos = ctx->saved_data["cos"].toTensor();
    inputs.sin = ctx->saved_data["sin"].toTensor();
    inputs.mask = ctx->saved_data["mask"].toTensor();
    // Saved: the hidden state, then the weights (their autograd edges are what we differentiate for).
    torch::autograd::variable_list wrt = ctx->get_saved_variables();
    const torch::Tensor hidden = wrt[0].detach().requires_grad_(true);
    wrt[0] = hidden;
    torch::Tensor out;
    {
      torch::AutoGradMode enable(true);
      if (ctx->saved_data.count("rng_state") > 0) {
        // Replays forward's random draws (dropout masks), then puts the generator back where it was.
        at::Generator gen = at::globalContext().defaultGenerator(hidden.device());
        at::Tensor now;
        {
          std::lock_guard<std::mutex> lock(gen.mutex());
          now = gen.get_state();
          gen.set_state(ctx->saved_data["rng_state"].toTensor());
        }
        out = layer->forward(hidden, inputs);
        std::lock_guard<std::mutex> lock(gen.mutex());
        gen.set_state(now);
      } else {
        out = layer->forward(hidden, inputs);
      }
    }
    dist::IgnoreGradientHooks ignore_hooks;  // the outer backward reports these gradients
    torch::autograd::variable_list grads = torch::autograd::grad({out}, wrt, {grad_outputs[0]},
                                                                 /*retain_graph=*/false, /*create_graph=*/false,
                                                                 /*allow_unused=*/true);
    grads.push_back(torch::Tensor());  // layer
    grads.push_back(torch::Tensor());  // inputs
    return grads;
  }
};

// 1 when every row's real tokens come first (1...1 0...0), else 0, as an fp64 scalar on the mask's
// device (read by the caller, with others at once). Such a batch needs no padding mask: causal
// attention never looks right, and positions count from 0 either way; without the mask, attention
// takes SDPA's fused causal kernels.
torch::Tensor right_padded_only(const torch::Tensor& padding_mask) {
  const auto options = padding_mask.options().dtype(torch::kFloat64);
  if (padding_mask.dim() != 2) return torch::zeros({}, options);
  if (padding_mask.size(1) < 2) return torch::ones({}, options);
  const torch::Tensor real = padding_mask.to(torch::kInt8);
  return (real.slice(1, 1) <= real.slice(1, 0, -1)).all().to(torch::kFloat64);
}

}  // namespace

torch::Tensor forward_with_checkpointing(CausalLm& model, const torch::Tensor& input_ids,
                                         const torch::Tensor& padding_mask) {
  if (!input_ids.defined() || input_ids.dim() != 2) {
    throw InputError("forward_with_checkpointing: input_ids must be a [batch, steps] int64 tensor");
  }
  ForwardInputs in;
  in.input_ids = input_ids;
  in.padding_mask = padding_mask;
  AttentionInputs attn = model->full_pass_inputs(in);
  torch::Tensor h = model->model->embed_tokens(input_ids);
  for (const auto& module : *model->model->layers) {
    auto* layer = module->as<DecoderLayer>();
    const std::vector<torch::Tensor> weights = layer_weights(*layer);
    if (!h.requires_grad() && weights.empty()) {
      h = layer->forward(h, attn);  // nothing to differentiate here
    } else {
      h = CheckpointedLayer::apply(h, at::TensorList(weights), layer, &attn);
    }
  }
  h = model->model->norm(h);
  if (model->lm_head) return model->lm_head(h);
  return torch::nn::functional::linear(h, model->model->embed_tokens->weight);
}

Trainer::Trainer(CausalLm model, TrainerOptions options, dist::Communicator& comm, LoraAdapters* lora)
    : model_(std::move(model)), options_(options), comm_(comm), lora_(lora) {
  options_.schedule.validate();
  std::vector<std::pair<std::string, torch::Tensor>> trainable;
  if (lora_ != nullptr) {
    trainable = lora_->named_parameters();
  } else {
    for (auto& [name, tensor] : policy::state_tensors(model_)) {
      tensor.set_requires_grad(true);
      trainable.emplace_back(name, tensor);
    }
  }
  std::vector<torch::Tensor> params;
  for (const auto& item : trainable) params.push_back(item.second);
  reducer_ = std::make_unique<dist::GradientReducer>(params, comm_, options_.reducer);
  reducer_->broadcast_parameters(0);
  optimizer_ = std::make_unique<MasterAdamW>(std::move(trainable), options_.adamw);
}

torch::Tensor Trainer::forward(const MicroBatch& batch) {
  const bool keep_padding = batch.padding_mask.defined() && right_padded_only(batch.padding_mask).item<double>() == 0;
  return forward(batch, keep_padding);
}

torch::Tensor Trainer::forward(const MicroBatch& batch, bool keep_padding) {
  const torch::Tensor padding = keep_padding ? batch.padding_mask : torch::Tensor();
  if (options_.activation_checkpointing) return forward_with_checkpointing(model_, batch.input_ids, padding);
  ForwardInputs in;
  in.input_ids = batch.input_ids;
  in.padding_mask = padding;
  return model_->forward(in);
}

StepStats Trainer::step(const std::vector<MicroBatch>& micro_batches, const LossSumFn& loss_sum) {
  if (micro_batches.empty()) throw InputError("Trainer::step: no micro-batches");
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    const MicroBatch& mb = micro_batches[i];
    if (!mb.loss_mask.defined() || !mb.input_ids.defined() || mb.loss_mask.sizes() != mb.input_ids.sizes()) {
      throw InputError(fmt::format("Trainer::step: micro-batch {}: loss_mask must have input_ids' shape", i));
    }
  }
  // What the step needs to know before it starts, read from the device in one go while nothing is
  // queued: per micro-batch, its loss tokens and whether its padding mask can be dropped.
  const torch::Device device = micro_batches[0].input_ids.device();
  std::vector<torch::Tensor> facts;  // per micro-batch: loss tokens, then 1 if only right-padded
  for (const MicroBatch& mb : micro_batches) {
    facts.push_back(mb.loss_mask.slice(1, 1, mb.loss_mask.size(1)).to(torch::kFloat64).sum().to(device));
    facts.push_back(mb.padding_mask.defined() ? right_padded_only(mb.padding_mask).to(device)
                                              : torch::ones({}, torch::TensorOptions().dtype(torch::kFloat64).device(device)));
  }
  const torch::Tensor read = torch::stack(facts).cpu();
  const double* values = read.data_ptr<double>();
  double local_tokens = 0;
  std::vector<bool> keep_padding(micro_batches.size());
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    local_tokens += values[2 * i];
    keep_padding[i] = micro_batches[i].padding_mask.defined() && values[2 * i + 1] == 0;
  }
  const double global_tokens = comm_.all_reduce_scalar(local_tokens);
  if (global_tokens <= 0) throw InputError("Trainer::step: no loss tokens on any rank");

  // From here to the optimiser's launch nothing waits for the GPU (no .item()), so the CPU queues
  // work ahead of it; the step's figures are read once, at the end.
  model_->train();
  reducer_->begin_step();
  torch::Tensor local_loss;
  for (size_t i = 0; i < micro_batches.size(); ++i) {
    reducer_->begin_micro_batch(i + 1 == micro_batches.size());
    const torch::Tensor logits = forward(micro_batches[i], keep_padding[i]);
    const torch::Tensor sum = loss_sum(logits, i);
    if (!sum.defined() || sum.numel() != 1) throw InputError("Trainer::step: the loss function must return a scalar");
    const torch::Tensor scaled = sum.to(torch::kFloat32) / global_tokens;
    scaled.backward();
    const torch::Tensor loss_value = sum.detach().to(torch::kFloat64).reshape({});
    local_loss = local_loss.defined() ? local_loss + loss_value : loss_value;
  }
  reducer_->finish();
  // The model's own .grad copies (autograd accumulates them beside the reducer's fp32 sums) are
  // not used: free them.
  for (const auto& p : reducer_->parameters()) p.mutable_grad() = torch::Tensor();

  StepStats stats;
  stats.tokens = static_cast<int64_t>(global_tokens);
  const torch::Tensor grad_norm = MasterAdamW::clip_grad_norm(reducer_->gradients(), options_.max_grad_norm);
  stats.lr = options_.schedule.lr_at(optimizer_->steps());
  // A non-finite norm is exactly a NaN or Inf in some gradient: the optimiser skips on the device.
  const torch::Tensor found_inf =
      optimizer_->step(reducer_->gradients(), stats.lr, MasterAdamW::non_finite(grad_norm));
  // The step's one read: norm, skip flag and loss together.
  const torch::Tensor figures =
      torch::stack({grad_norm.to(torch::kFloat64), found_inf.to(torch::kFloat64), local_loss.to(grad_norm.device())}).cpu();
  const double* figure = figures.data_ptr<double>();
  stats.grad_norm = figure[0];
  stats.skipped = figure[1] != 0;
  optimizer_->settle_step(stats.skipped);
  stats.step = optimizer_->steps();
  stats.loss = comm_.all_reduce_scalar(figure[2]) / global_tokens;
  return stats;
}

}  // namespace crl::rl
