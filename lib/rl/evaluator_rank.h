// An evaluator rank of the job (world ranks T..), an object that exists on the evaluators only:
// its GPU, its compiler (threads from the node's core budget) and its Evaluator, serving rank 0's
// programs (dispatch.h) until rank 0 says stop.
#pragma once

#include "dist/mpi_roles.h"
#include "rl/dispatch.h"
#include "rl/job_context.h"

namespace crl::rl {

class EvaluatorRank {
 public:
  EvaluatorRank(const JobContext& context, const dist::MpiRoles& roles) : context_(context), roles_(roles) {}
  // Judges programs until rank 0's stop order; returns what it said.
  StopNotice run();

 private:
  const JobContext& context_;
  const dist::MpiRoles& roles_;
};

}  // namespace crl::rl
