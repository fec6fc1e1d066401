// A candidate's outputs against the reference's (outputs.h).
#include "eval/stages/outputs.h"

#include <fmt/format.h>

#include "eval/stages/idle.h"
#include "program/tolerance.h"

namespace crl::eval {
namespace {

using Problem = OutputCheck::Problem;

// Shapes, dtypes and devices first: nothing of a candidate is read before they agree.
OutputCheck check_shapes(const TaskJudge& j, const std::vector<worker::TensorRef>& refs) {
  const size_t want = j.outputs.size();
  if (refs.size() > want + 1) {
    return {Problem::crash, fmt::format("malformed output description: {} tensor references, at most {} expected", refs.size(), want + 1)};
  }
  if (refs.size() != want) return {Problem::mismatch, fmt::format("returned {} outputs, the reference returns {}", refs.size(), want)};
  for (size_t i = 0; i < refs.size(); ++i) {
    if (!(refs[i].meta == j.outputs[i].meta) || refs[i].device != j.outputs[i].device) {
      return {Problem::mismatch, fmt::format("output {}: shape and dtype {} on {}, but the reference's are {} on {}", i,
                                             worker::describe(refs[i].meta), refs[i].device, worker::describe(j.outputs[i].meta),
                                             j.outputs[i].device)};
    }
  }
  return {};
}

// One comparison by the judge. CPU outputs are first copied out of the frozen worker into the
// region the judge reads (bounded by the reference's sizes).
OutputCheck compare_once(Evaluation& e, WorkerProcess& worker, const std::vector<worker::TensorRef>& refs, const std::string& key) {
  uint64_t offset = 0;
  worker::CompareRequest request{key, {}};
  for (worker::TensorRef ref : refs) {
    if (ref.device == "cpu") {
      try {
        worker::read_process_memory(worker.pid(), ref.address, static_cast<uint64_t>(ref.meta.nbytes()),
                                    static_cast<char*>(e.task_judge.region) + offset);
      } catch (const InputError& error) {
        return {Problem::crash, error.what()};
      }
      ref.address = offset;
      offset += (static_cast<uint64_t>(ref.meta.nbytes()) + 255) / 256 * 256;
    }
    request.outputs.push_back(std::move(ref));
  }
  const auto compared = e.judge.ask(request, "comparing outputs");
  // An output handle that does not open is the candidate's doing, not crl's: the judge says so.
  if (!compared) return {Problem::judge_failed, ""};
  if (!compared->match) return {Problem::mismatch, compared->message, compared->precision_ratio};
  return {Problem::none, "", compared->precision_ratio};
}

}  // namespace

std::string precision_words(const OutputCheck& check) {
  if (check.precision_ratio < 0) return "";
  return fmt::format("; error {:.2g}x the float32 reference's against float64 (at most {:g})", check.precision_ratio, kPrecisionFactor);
}

OutputCheck check_outputs(Evaluation& e, WorkerProcess& worker, const std::vector<worker::TensorRef>& refs, const std::string& key) {
  worker.freeze();
  if (!worker.running()) return {Problem::mismatch, "the worker " + worker.exit().describe()};
  if (OutputCheck shapes = check_shapes(e.task_judge, refs); !shapes.ok()) return shapes;
  if (!e.cuda()) return compare_once(e, worker, refs, key);
  const IdleWait now = await_idle(e, 0);
  if (!now.asked) return {Problem::judge_failed, ""};
  if (now.idle) return compare_once(e, worker, refs, key);
  const OutputCheck while_busy = compare_once(e, worker, refs, key);
  if (while_busy.problem == Problem::judge_failed || while_busy.problem == Problem::crash) return while_busy;
  const IdleWait later = await_idle(e, e.options.guard_settle_seconds);
  if (!later.asked) return {Problem::judge_failed, ""};
  if (!later.idle) {
    return {Problem::deferred_work,
            fmt::format("work was still running on the GPU {:.0f} ms after the worker replied (idle probe {} at first, {} at last, "
                        "{:.0f} us when idle)",
                        1e3 * later.waited_s, probe_readings(now.first), probe_readings(later.last), now.first.baseline_us)};
  }
  if (while_busy.ok()) return while_busy;
  const OutputCheck once_idle = compare_once(e, worker, refs, key);
  if (!once_idle.ok()) return once_idle;
  return {Problem::deferred_work,
          fmt::format("the outputs were complete only after the worker replied: while the GPU was busy (idle probe {}, {:.0f} us "
                      "when idle) they differed ({}), {:.1f} ms later, idle, they matched",
                      probe_readings(now.first), now.first.baseline_us, while_busy.message, 1e3 * later.waited_s)};
}

}  // namespace crl::eval
