// KernelBench's rule for parameters inside a worker (LoadRequest::kernelbench_seed): the task's
// KernelBench Model built under the seed, and the values of the spec's params it holds, which stand
// in for the drawn ones in every call the worker makes arguments for.
#pragma once

#include <string>

#include "program/arguments.h"
#include "program/task_spec.h"

namespace crl::worker {

// Model built from `module` (a KernelBench checkout's, trusted) under `seed` at `scale` on `device`
// (embedded Python: pyprogram). Error naming the difference when its tensors do not match the spec
// (a checkout of another KernelBench version): no verdict may rest on other values than Model's.
FixedParams kernelbench_param_values(const std::string& module, uint64_t seed, const TaskSpec& spec, const std::string& scale,
                                     const at::Device& device);

}  // namespace crl::worker
