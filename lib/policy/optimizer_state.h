// The optimiser state a checkpoint saves beside the model, as named tensors; the optimiser itself
// (rl::MasterAdamW) lives with training in lib/rl, so policy's checkpoints know only this.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace crl::policy {

class OptimizerState {
 public:
  virtual ~OptimizerState() = default;
  // Every state tensor by a name unique within the optimiser.
  virtual std::vector<std::pair<std::string, torch::Tensor>> state_tensors() const = 0;
  // Restores what state_tensors() wrote; validates names and shapes, naming `origin` in errors.
  virtual void load_state_tensors(const std::map<std::string, torch::Tensor>& tensors, const std::string& origin) = 0;
};

}  // namespace crl::policy
