// Where a result came from, for the /meta of every results file: crl's git commit (the GPUs'
// names come from machine/gpu_names.h, which links the CUDA runtime; core does not).
#pragma once

#include <string>

namespace crl {

// The commit crl was built from (`git rev-parse HEAD` in its source tree), or "unknown".
std::string git_commit();

}  // namespace crl
