// The names of the visible GPUs, for the /meta of results files and the trainers' rank table.
#pragma once

#include <string>
#include <vector>

namespace crl {

// The name of GPU `index` modulo the visible count ("NVIDIA H200"), "cpu" on the CPU backend, or
// "cuda (unknown)" when no GPU answers.
std::string device_name(const std::string& backend, int index);

// Every visible GPU's name (empty without CUDA or GPUs).
std::vector<std::string> visible_gpu_names();

}  // namespace crl
