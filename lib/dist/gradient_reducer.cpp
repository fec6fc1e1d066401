// Bucketed gradient all-reduce overlapped with backward (see gradient_reducer.h).
#include "dist/gradient_reducer.h"

#include <torch/torch.h>

#include <fmt/format.h>

#include "core/error.h"

namespace crl::dist {
namespace {
thread_local int ignore_hooks_depth = 0;
}  // namespace

IgnoreGradientHooks::IgnoreGradientHooks() { ++ignore_hooks_depth; }
IgnoreGradientHooks::~IgnoreGradientHooks() { --ignore_hooks_depth; }
bool IgnoreGradientHooks::active() { return ignore_hooks_depth > 0; }

GradientReducer::GradientReducer(std::vector<torch::Tensor> params, Communicator& comm, ReducerOptions options)
    : params_(std::move(params)), comm_(comm), options_(options) {
  if (params_.empty()) throw InputError("GradientReducer: no trainable parameters");
  const torch::Device device = params_.front().device();
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].requires_grad() || !params_[i].is_leaf()) {
      throw InputError(fmt::format("GradientReducer: parameter {} is not a trainable leaf tensor", i));
    }
    if (params_[i].device() != device) {
      throw InputError(fmt::format("GradientReducer: parameter {} is on {}, parameter 0 on {}", i,
                                   params_[i].device().str(), device.str()));
    }
  }
  // Reverse order: the last layers' gradients come first in backward.
  slots_.resize(params_.size());
  bucket_of_.resize(params_.size());
  arrived_.assign(params_.size(), false);
  written_.assign(params_.size(), false);
  const int64_t bucket_elements = std::max<int64_t>(1, static_cast<int64_t>(options_.bucket_bytes / 4));
  std::vector<std::vector<size_t>> groups;
  int64_t filled = bucket_elements;
  for (size_t k = params_.size(); k-- > 0;) {
    if (filled + params_[k].numel() > bucket_elements && (groups.empty() || !groups.back().empty())) {
      groups.emplace_back();
      filled = 0;
    }
    groups.back().push_back(k);
    filled += params_[k].numel();
  }
  for (auto& members : groups) {
    int64_t total = 0;
    for (size_t k : members) total += params_[k].numel();
    Bucket bucket;
    bucket.flat = torch::zeros({total}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
    int64_t offset = 0;
    for (size_t k : members) {
      slots_[k] = bucket.flat.narrow(0, offset, params_[k].numel()).view(params_[k].sizes());
      bucket_of_[k] = buckets_.size();
      offset += params_[k].numel();
    }
    bucket.members = std::move(members);
    buckets_.push_back(std::move(bucket));
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    hook_handles_.push_back(params_[i].register_hook([this, i](torch::Tensor grad) { on_gradient(i, grad); }));
  }
}

GradientReducer::~GradientReducer() {
  for (auto& bucket : buckets_) bucket.pending.reset();  // waits
  for (size_t i = 0; i < params_.size(); ++i) {
    try {
      params_[i].remove_hook(hook_handles_[i]);
    } catch (...) {
    }
  }
}

void GradientReducer::begin_step() {
  for (auto& bucket : buckets_) {
    if (bucket.pending) bucket.pending->wait();
    bucket.pending.reset();
    bucket.launched = false;
    bucket.arrived = 0;
  }
  // No zeroing here (2 GB of writes for a 0.5B model, and as much again read back by the adds):
  // the first gradient is copied in, and launch() zeroes the slots that got none.
  std::fill(written_.begin(), written_.end(), false);
  launched_early_ = 0;
  in_step_ = true;
  begin_micro_batch(true);
}

void GradientReducer::begin_micro_batch(bool last) {
  if (!in_step_) throw Error("GradientReducer: begin_micro_batch() before begin_step()");
  last_micro_batch_ = last;
  std::fill(arrived_.begin(), arrived_.end(), false);
  for (auto& bucket : buckets_) bucket.arrived = 0;
}

void GradientReducer::on_gradient(size_t index, const torch::Tensor& grad) {
  if (IgnoreGradientHooks::active()) return;
  if (!in_step_) return;  // a backward outside a training step (e.g. a test's own) is not ours
  Bucket& bucket = buckets_[bucket_of_[index]];
  if (bucket.launched) {
    throw Error(fmt::format("GradientReducer: a gradient for parameter {} arrived after its bucket was "
                            "all-reduced (a second backward in the last micro-batch?)", index));
  }
  if (written_[index]) {
    slots_[index].add_(grad.detach().view_as(slots_[index]));
  } else {
    slots_[index].copy_(grad.detach().view_as(slots_[index]));
    written_[index] = true;
  }
  if (arrived_[index]) return;  // a second contribution in the same backward: summed above
  arrived_[index] = true;
  if (last_micro_batch_ && options_.overlap && ++bucket.arrived == bucket.members.size()) {
    launch(bucket);
    ++launched_early_;
  }
}

void GradientReducer::launch(Bucket& bucket) {
  for (size_t k : bucket.members) {
    if (!written_[k]) slots_[k].zero_();  // no gradient this step counts as zero
  }
  bucket.launched = true;
  if (comm_.size() > 1) bucket.pending = comm_.all_reduce_sum(bucket.flat);
}

void GradientReducer::finish() {
  if (!in_step_) throw Error("GradientReducer: finish() before begin_step()");
  for (auto& bucket : buckets_) {
    if (!bucket.launched) launch(bucket);
  }
  for (auto& bucket : buckets_) {
    if (bucket.pending) bucket.pending->wait();
    bucket.pending.reset();
  }
  in_step_ = false;
}

void GradientReducer::broadcast_parameters(int root) {
  if (comm_.size() == 1) return;
  torch::NoGradGuard no_grad;
  std::vector<std::unique_ptr<PendingCollective>> pending;
  std::vector<torch::Tensor> staging;
  for (auto& param : params_) {
    torch::Tensor data = param.detach();
    if (!data.is_contiguous()) {
      staging.push_back(data.contiguous());
      data = staging.back();
    }
    pending.push_back(comm_.broadcast(data, root));
  }
  for (auto& p : pending) p->wait();
  size_t s = 0;
  for (auto& param : params_) {
    if (!param.is_contiguous()) param.detach().copy_(staging[s++]);
  }
}

}  // namespace crl::dist
