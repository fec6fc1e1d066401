// Where a result came from, for the /meta of every results file: crl's git commit and the GPUs.
#pragma once

#include <string>
#include <vector>

namespace crl {

// The commit crl was built from (`git rev-parse HEAD` in its source tree), or "unknown".
std::string git_commit();

// The name of GPU `index` modulo the visible count ("NVIDIA H200"), "cpu" on the CPU backend, or
// "cuda (unknown)" when no GPU answers.
std::string device_name(const std::string& backend, int index);

// Every visible GPU's name (empty without CUDA or GPUs).
std::vector<std::string> visible_gpu_names();

}  // namespace crl
