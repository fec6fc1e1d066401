// token_log_probs (see token_log_probs.h): an autograd function with a CUDA path and an ATen path.
#include "rl/token_log_probs.h"

#include <fmt/format.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "core/error.h"

#if CRL_HAVE_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "rl/token_log_probs_cuda.h"
#endif

namespace crl::rl {
namespace {

#if CRL_HAVE_CUDA
// CRL_TOKEN_LOGP_KERNELS=0 takes the ATen path on CUDA too (to compare the two, or to rule the
// kernels out when something looks wrong).
bool kernels_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("CRL_TOKEN_LOGP_KERNELS");
    return v == nullptr || std::string(v) != "0";
  }();
  return enabled;
}

// The kernels' types; float64 (tests) takes the ATen path.
bool kernel_type(const torch::Tensor& logits, cuda::LogitsType& type) {
  if (!kernels_enabled()) return false;
  switch (logits.scalar_type()) {
    case torch::kFloat32: type = cuda::LogitsType::f32; return true;
    case torch::kBFloat16: type = cuda::LogitsType::bf16; return true;
    case torch::kFloat16: type = cuda::LogitsType::f16; return true;
    default: return false;
  }
}
#endif

// The ATen path computes in fp32, or fp64 for fp64 logits.
torch::ScalarType compute_type(const torch::Tensor& logits) {
  return logits.scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
}

// Returns {logp, lse}, both [N].
std::pair<torch::Tensor, torch::Tensor> forward_values(const torch::Tensor& logits, const torch::Tensor& targets) {
#if CRL_HAVE_CUDA
  cuda::LogitsType type;
  if (logits.is_cuda() && kernel_type(logits, type)) {
    const c10::cuda::CUDAGuard guard(logits.device());
    const auto options = logits.options().dtype(torch::kFloat32);
    torch::Tensor lse = torch::empty({logits.size(0)}, options);
    torch::Tensor logp = torch::empty({logits.size(0)}, options);
    cuda::token_log_probs_forward(type, logits.data_ptr(), logits.size(0), logits.size(1), logits.stride(0),
                                  targets.data_ptr<int64_t>(), lse.data_ptr<float>(), logp.data_ptr<float>(),
                                  at::cuda::getCurrentCUDAStream());
    return {logp, lse};
  }
#endif
  const torch::Tensor x = logits.to(compute_type(logits));
  const torch::Tensor lse = x.logsumexp(-1);
  return {x.gather(1, targets.unsqueeze(1)).squeeze(1) - lse, lse};
}

torch::Tensor backward_values(const torch::Tensor& logits, const torch::Tensor& targets, const torch::Tensor& lse,
                              const torch::Tensor& grad_logp) {
#if CRL_HAVE_CUDA
  cuda::LogitsType type;
  if (logits.is_cuda() && kernel_type(logits, type)) {
    const c10::cuda::CUDAGuard guard(logits.device());
    const torch::Tensor g = grad_logp.to(torch::kFloat32).contiguous();
    torch::Tensor grad = torch::empty(logits.sizes(), logits.options().memory_format(torch::MemoryFormat::Contiguous));
    cuda::token_log_probs_backward(type, logits.data_ptr(), logits.size(0), logits.size(1), logits.stride(0),
                                   targets.data_ptr<int64_t>(), lse.data_ptr<float>(), g.data_ptr<float>(),
                                   grad.data_ptr(), at::cuda::getCurrentCUDAStream());
    return grad;
  }
#endif
  const torch::Tensor g = grad_logp.to(compute_type(logits)).unsqueeze(1);
  torch::Tensor grad = -g * (logits.to(compute_type(logits)) - lse.unsqueeze(1)).exp();
  grad.scatter_add_(1, targets.unsqueeze(1), g);
  return grad.to(logits.scalar_type());
}

class TokenLogProbs : public torch::autograd::Function<TokenLogProbs> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& targets) {
    auto [logp, lse] = forward_values(logits, targets);
    // The logits themselves are saved (they exist anyway), not an fp32 softmax of them.
    ctx->save_for_backward({logits, targets, lse});
    return logp;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    return {backward_values(saved[0], saved[1], saved[2], grads[0]), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor token_log_probs(const torch::Tensor& logits, const torch::Tensor& targets) {
  if (!logits.defined() || logits.dim() != 2 || logits.size(1) == 0 || !targets.defined() || targets.dim() != 1 ||
      targets.size(0) != logits.size(0) || targets.scalar_type() != torch::kInt64 || targets.device() != logits.device()) {
    throw InputError("token_log_probs: logits must be [N, V] (V > 0) and targets [N] int64 on the logits' device");
  }
  if (!at::isFloatingType(logits.scalar_type())) throw InputError("token_log_probs: logits must be floating point");
  // The kernels read rows with a stride and the vocabulary contiguously.
  const torch::Tensor rows = logits.stride(1) == 1 && logits.stride(0) >= logits.size(1) ? logits : logits.contiguous();
  return TokenLogProbs::apply(rows, targets.contiguous());
}

}  // namespace crl::rl
