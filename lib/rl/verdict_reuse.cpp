// VerdictReuse: known verdicts copied, each new program judged once (verdict_reuse.h).
#include "rl/verdict_reuse.h"

#include <fmt/format.h>

#include <set>
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

// The key of a program for a task.
std::string key_of(const std::string& task, const std::string& program) { return Sha256().field(task).field(program).hex(); }

}  // namespace

std::map<int64_t, DispatchedVerdict> VerdictReuse::evaluate(std::vector<WorkItem> work, int64_t step, const Judge& judge) {
  std::map<int64_t, DispatchedVerdict> verdicts;
  std::map<std::string, int64_t> first_in_step;      // key -> the item judged for it in this call
  std::vector<std::pair<int64_t, int64_t>> same_as;  // (item, the item whose verdict it takes)
  std::vector<std::pair<int64_t, std::string>> copies;  // (item, key): items given a kept verdict
  std::map<int64_t, std::string> judged_key;            // items judged: their key
  std::set<int64_t> audits;                             // items judged again although a verdict was kept
  std::vector<WorkItem> to_judge;
  for (WorkItem& w : work) {
    std::string key = key_of(w.task, w.program);
    if (const auto known = judged_.find(key); known != judged_.end()) {
      const int64_t copy = ++known->second.copies;
      if (known->second.verdict.ok() && (copy & (copy - 1)) == 0) {  // copies 1, 2, 4, 8, ...
        audits.insert(w.work_id);
        judged_key.emplace(w.work_id, key);
        to_judge.push_back(w);
      }
      copies.emplace_back(w.work_id, std::move(key));
    } else if (const auto first = first_in_step.find(key); first != first_in_step.end()) {
      same_as.emplace_back(w.work_id, first->second);
    } else {
      first_in_step.emplace(key, w.work_id);
      judged_key.emplace(w.work_id, std::move(key));
      to_judge.push_back(std::move(w));
    }
  }
  reused_last_ = copies.size() + same_as.size() - audits.size();
  audits_last_ = audits.size();
  std::map<int64_t, DispatchedVerdict> judged = judge(to_judge);
  for (auto& [id, d] : judged) {
    const auto key = judged_key.find(id);
    if (key == judged_key.end() || !reusable(d.verdict.status)) continue;
    if (audits.count(id) > 0) {
      // An audit that fails replaces the kept verdict: every copy from now on (this step's too)
      // takes the failure. One that passes changes nothing (the kept speedup stays the reward).
      Judged& kept = judged_.at(key->second);
      if (!d.verdict.ok() && kept.verdict.ok()) kept = {without_logs(d.verdict), id, step};  // the first failure found
    } else if (judged_.size() < max_programs_) {
      judged_[key->second] = {without_logs(d.verdict), id, step};
    }
  }
  for (const auto& [id, key] : copies) {
    const auto judged_now = judged.find(id);
    const Judged& kept = judged_.at(key);
    if (judged_now != judged.end() && !judged_now->second.verdict.ok() && reusable(judged_now->second.verdict.status)) {
      verdicts[id] = std::move(judged_now->second);  // an audit that found a failure: its own judgement
      continue;
    }
    DispatchedVerdict copy = copy_for(kept.verdict, id, kept.rollout_id, kept.step);
    if (judged_now != judged.end()) {
      // An audit that passed (or could not decide): its evaluator's time was spent all the same.
      copy.evaluator_rank = judged_now->second.evaluator_rank;
      copy.seconds = judged_now->second.seconds;
      copy.verdict.message = fmt::format("audited again ({}); {}", judged_now->second.verdict.status_text(), copy.verdict.message);
    }
    verdicts[id] = std::move(copy);
  }
  for (auto& [id, d] : judged) {
    if (audits.count(id) == 0) verdicts[id] = std::move(d);
  }
  for (const auto& [id, first] : same_as) {
    if (const auto it = verdicts.find(first); it != verdicts.end()) verdicts[id] = copy_for(it->second.verdict, id, first, step);
  }
  return verdicts;
}

}  // namespace crl::rl
