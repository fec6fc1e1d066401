// A KernelBench checkout (ScalingIntelligence/KernelBench, or a folder laid out as its
// KernelBench/level<N>/<problem>_<Name>.py): the module a suite task was made from.
#pragma once

#include <string>

namespace crl {

// The task's KernelBench module in a checkout (`dir` or its KernelBench/ folder:
// level<N>/<problem>_*.py); IoError naming the folder and the task when there is none.
std::string read_kernelbench_module(const std::string& dir, const std::string& task_id);

}  // namespace crl
