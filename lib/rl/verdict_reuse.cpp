// VerdictReuse: known verdicts copied, each new program judged once (verdict_reuse.h).
#include "rl/verdict_reuse.h"

#include <fmt/format.h>

#include <utility>

#include "core/hash.h"

namespace crl::rl {
namespace {

eval::Verdict without_logs(eval::Verdict v) {
  v.compile_log.clear();
  v.worker_log.clear();
  v.steps.clear();
  return v;
}

DispatchedVerdict copy_for(const eval::Verdict& judged, int64_t id, int64_t judged_id, int64_t judged_step) {
  eval::Verdict v = without_logs(judged);
  v.candidate = fmt::format("rollout {}", id);
  v.message = fmt::format("the verdict of rollout {} (step {}), the same program for this task: {}", judged_id,
                          judged_step, judged.message);
  return DispatchedVerdict{std::move(v), -1, 0.0};
}

// A second judgement could change these: the judge's own failure, a moment of load.
bool reusable(eval::VerdictStatus s) {
  return s != eval::VerdictStatus::kInternalError && s != eval::VerdictStatus::kTimeout;
}

}  // namespace

std::map<int64_t, DispatchedVerdict> VerdictReuse::evaluate(std::vector<WorkItem> work, int64_t step, const Judge& judge) {
  std::map<int64_t, DispatchedVerdict> verdicts;
  std::map<std::string, int64_t> first_in_step;      // key -> the item judged for it in this call
  std::vector<std::pair<int64_t, int64_t>> same_as;  // (item, the item whose verdict it takes)
  std::map<int64_t, std::string> key_of;
  std::vector<WorkItem> to_judge;
  for (WorkItem& w : work) {
    std::string key = Sha256().field(w.task).field(w.program).hex();
    if (const auto known = judged_.find(key); known != judged_.end()) {
      verdicts[w.work_id] = copy_for(known->second.verdict, w.work_id, known->second.rollout_id, known->second.step);
    } else if (const auto first = first_in_step.find(key); first != first_in_step.end()) {
      same_as.emplace_back(w.work_id, first->second);
    } else {
      first_in_step.emplace(key, w.work_id);
      key_of.emplace(w.work_id, std::move(key));
      to_judge.push_back(std::move(w));
    }
  }
  reused_last_ = verdicts.size() + same_as.size();
  for (auto& [id, d] : judge(to_judge)) {
    const auto key = key_of.find(id);
    if (key != key_of.end() && reusable(d.verdict.status) && judged_.size() < max_programs_) {
      judged_[key->second] = {without_logs(d.verdict), id, step};
    }
    verdicts[id] = std::move(d);
  }
  for (const auto& [id, first] : same_as) {
    if (const auto it = verdicts.find(first); it != verdicts.end()) verdicts[id] = copy_for(it->second.verdict, id, first, step);
  }
  return verdicts;
}

}  // namespace crl::rl
