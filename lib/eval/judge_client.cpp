// The judge's failure as a verdict.
#include "eval/judge_client.h"

namespace crl::eval {

Failure JudgeClient::lost(const std::string& during) const {
  return Failure::of(VerdictStatus::kInternalError,
                     "the judge failed while " + during + (last_error_.empty() ? "" : " (" + last_error_ + ")") + "\n" +
                         judge_.log(max_log_bytes_),
                     Failure::Cleanup::drop_judge);
}

}  // namespace crl::eval
