// Packing sequences into micro-batches (micro_batches.h).
#include "rl/micro_batches.h"

#include <torch/torch.h>

#include <algorithm>

#include "core/error.h"

namespace crl::rl {
namespace {

// Row `row` of the micro-batch's tensors from sequence `s`.
void fill_row(const Sequence& s, int64_t row, torch::Tensor& ids, torch::Tensor& padding, torch::Tensor& loss,
              torch::Tensor& generating_logp, torch::Tensor& has_generating_logp) {
  auto a = ids.accessor<int64_t, 2>();
  auto p = padding.accessor<int64_t, 2>();
  auto l = loss.accessor<int64_t, 2>();
  int64_t c = 0;
  for (int64_t v : *s.prompt) {
    a[row][c] = v;
    p[row][c++] = 1;
  }
  for (int64_t v : *s.completion) {
    a[row][c] = v;
    p[row][c] = 1;
    l[row][c] = s.train && c > 0 ? 1 : 0;  // column 0 is never a target
    ++c;
  }
  if (s.generating_logp == nullptr) return;
  if (s.generating_logp->size() != s.completion->size()) throw Error("a rollout's log-probs do not match its tokens");
  auto g = generating_logp.accessor<float, 2>();
  const int64_t first = static_cast<int64_t>(s.prompt->size());
  for (size_t j = 0; j < s.generating_logp->size(); ++j) g[row][first + static_cast<int64_t>(j)] = (*s.generating_logp)[j];
  has_generating_logp[row] = true;
}

}  // namespace

MicroBatches micro_batches(const std::vector<Sequence>& sequences, const MicroBatchOptions& options) {
  if (options.size == 0) throw InputError("micro_batches: a micro-batch of 0 sequences");
  MicroBatches out;
  for (size_t start = 0; start < sequences.size(); start += options.size) {
    const size_t end = std::min(sequences.size(), start + options.size);
    int64_t width = 2;
    for (size_t i = start; i < end; ++i) {
      width = std::max<int64_t>(width, static_cast<int64_t>(sequences[i].prompt->size() + sequences[i].completion->size()));
    }
    const int64_t rows = static_cast<int64_t>(end - start);
    torch::Tensor ids = torch::full({rows, width}, options.pad_token_id, torch::kInt64);
    torch::Tensor padding = torch::zeros({rows, width}, torch::kInt64);
    torch::Tensor loss = torch::zeros({rows, width}, torch::kInt64);
    torch::Tensor advantages = torch::zeros({rows}, torch::kFloat32);
    torch::Tensor generating_logp = torch::zeros({rows, width}, torch::kFloat32);
    torch::Tensor has_generating_logp = torch::zeros({rows}, torch::kBool);
    for (size_t i = start; i < end; ++i) {
      const int64_t row = static_cast<int64_t>(i - start);
      fill_row(sequences[i], row, ids, padding, loss, generating_logp, has_generating_logp);
      advantages[row] = static_cast<float>(sequences[i].advantage);
    }
    out.batches.push_back({ids.to(options.device), padding.to(options.device), loss.to(options.device)});
    out.advantages.push_back(advantages.to(options.device));
    out.generating_logp.push_back(generating_logp.to(options.device));
    out.has_generating_logp.push_back(has_generating_logp.to(options.device));
  }
  return out;
}

}  // namespace crl::rl
