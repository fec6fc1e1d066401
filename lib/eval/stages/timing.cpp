// The timing stage (timing.h).
#include "eval/stages/timing.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>

#include "core/clock.h"
#include "core/process_env.h"
#include "core/statistics.h"
#include "eval/stages/idle.h"
#include "eval/stages/outputs.h"
#include "eval/stages/stop_rule.h"
#include "eval/stages/trials.h"
#include "eval/turn_server.h"
#include "eval/worker_call.h"

namespace crl::eval {
namespace {

using Problem = OutputCheck::Problem;

// crl's side failed: the judge, the reference's worker, or a GPU that stayed busy.
Failure internal(std::string why) { return Failure::of(VerdictStatus::kInternalError, std::move(why), Failure::Cleanup::drop_judge); }

// The interquartile range over the median: how much one program's calls spread (for the message
// of a measurement too noisy to reward: whose times were the noisy ones).
double relative_iqr(const std::vector<double>& times_us) {
  const TimeSummary t = summarize_times(times_us);
  return t.median_us > 0 ? t.iqr_us / t.median_us : 0;
}

// What the measurement saw besides its times, for the timing step's detail.
struct Diagnostics {
  double pairs_wall = 0, timed_wall = 0;
  std::map<std::string, double> judge_seconds;  // the judge's requests within pairs, by op
  int late_idle_pairs = 0;                      // pairs whose GPU read busy after the candidate's reply (the wait charged to it)
  double late_idle_ms_max = 0;
  std::vector<double> reference_check_us, candidate_check_us;  // GPU: the idle check ending each batch (settle)
  // A worker's own view of its timed batches (a diagnostic; docs/evaluation.md): by its CUDA events
  // the GPU time of a batch's first call and the later calls' mean, the host's time to queue the
  // first, and how much of the request it spent inside the worker (and of that, describing).
  struct EventTimes {
    std::vector<double> first_call_us, later_call_us, first_host_us, served_us, describe_us, request_us, before_us, after_us;
    // `sent_at_us`, `received_at_us`: the evaluator's monotonic clock around the request.
    void add(const worker::BatchTimelineSummary& t, double request_seconds, double sent_at_us, double received_at_us) {
      if (t.served_us && t.describe_us) {
        served_us.push_back(*t.served_us);
        describe_us.push_back(*t.describe_us);
        request_us.push_back(1e6 * request_seconds);
      }
      // Kept only where both clocks agree (one host clock, the worker's claims in order): the
      // worker reports them, so they explain and never measure.
      if (t.arrived_at_us && t.described_at_us && sent_at_us <= *t.arrived_at_us && *t.arrived_at_us <= *t.described_at_us &&
          *t.described_at_us <= received_at_us) {
        before_us.push_back(*t.arrived_at_us - sent_at_us);
        after_us.push_back(received_at_us - *t.described_at_us);
      }
      if (t.first_call_device_us) {
        first_call_us.push_back(*t.first_call_device_us);
        first_host_us.push_back(t.first_call_host_us.value_or(0.0));
      }
      if (t.later_call_device_us) later_call_us.push_back(*t.later_call_device_us);
    }
    std::string describe() const {
      std::string served;
      if (!served_us.empty()) {
        served = fmt::format("; a batch's request {:.0f} us by the evaluator's clock, {:.0f} us of it in the worker ({:.0f} us "
                             "describing the outputs)",
                             median(request_us), median(served_us), median(describe_us));
      }
      if (!before_us.empty()) {
        served += fmt::format(", {:.0f} us from sending it to the worker's reading it, {:.0f} us from the worker's description to "
                              "the evaluator's reading the reply",
                              median(before_us), median(after_us));
      }
      return fmt::format("a batch's first {:.1f} us{} (medians; the host queued the first in {:.1f} us{})", median(first_call_us),
                         later_call_us.empty() ? "" : fmt::format(", the later ones {:.1f} us each", median(later_call_us)),
                         median(first_host_us), served);
    }
  };
  // The candidate's as its worker reports them (its own process: a diagnostic, never its time).
  EventTimes reference_events, candidate_events;
  // CPU backend: batches whose CPU time over the cores given exceeded their wall time (charged).
  int reference_cpu_charged = 0, candidate_cpu_charged = 0;
  double reference_cpu_ratio_max = 0, candidate_cpu_ratio_max = 0;
  // Checked slots held to the precision contract (all, where the reference runs in float64), and
  // the largest ratio they showed.
  int float64_slots = 0;
  double float64_ratio_max = 0;
  // CPU backend, turns: the evaluator's own work inside the batches (reveals, samples), taken out.
  double turns_served_seconds = 0;
  int turns_served = 0;
  int turn_calls = 0, turn_calls_dropped = 0;  // calls timed by their turns, and those left out as stretched
};

// One timed batch: its reply and the time charged for it (seconds).
struct TimedBatch {
  worker::TimeReply reply;
  double seconds = 0;
  // With turns: a call's time by the evaluator's clock (turn_server.h), CPU time charged; the
  // request's fixed cost is then in no call's time.
  std::optional<double> per_call_us;
  std::unique_ptr<TurnServer> turns;  // with turns: what was sampled, for the checked slot
  double sent_at_us = 0, received_at_us = 0;  // the evaluator's monotonic clock around the request (diagnostics)
};

class TimingRun {
 public:
  TimingRun(Evaluation& e, WorkerProcess& candidate, const TimingPlan& plan)
      : e_(e), candidate_(candidate), reference_(*e.task_judge.reference_worker), plan_(plan),
        rule_(StopRule::from(e.options, plan.min_pairs, plan.budget_seconds, plan.max_relative_ci)), cores_given_(cores_given()),
        turns_(!e.cuda() && e.options.call_turns) {
    for (int s = 0; s < plan.slots; ++s) slot_list_.push_back(s);
  }
  Result<Measurement> run();

 private:
  double cores_given() const;
  std::optional<Failure> wait_for_idle_gpu();
  enum class Batch { empty, reference, candidate };
  Result<double> settle(Batch batch, double batch_seconds);
  Result<double> request_overhead();
  std::optional<Failure> warm_up();
  std::optional<Failure> time_pair(double round_trip_us);
  Result<TimedBatch> time_batch(WorkerProcess& worker, char* arena, const std::string& during, int* charged, double* ratio_max);
  std::optional<Failure> time_reference(double round_trip_us, double* us, double* seconds);
  std::optional<Failure> time_candidate(double round_trip_us, double* us, double* seconds, worker::TimeReply* reply);
  std::optional<Failure> check_slot(const PairDraws& draws, const worker::TimeReply& reply);
  bool clearly_slow(int pairs_done) const;
  std::string pair_cost() const;
  std::string pair_name() const { return fmt::format("{} pair {}", plan_.purpose, m_.reference_us.size() + 1); }
  // A worker's CPU time and thawed time at one moment, read together before a timed batch.
  struct CpuMark {
    double cpu_seconds;
    double thawed_seconds;
  };
  double charge_cpu(const WorkerProcess& w, double wall_s, double served_s, CpuMark before, int* charged, double* ratio_max) const;

  Evaluation& e_;
  WorkerProcess& candidate_;
  WorkerProcess& reference_;
  TimingPlan plan_;
  StopRule rule_;
  double cores_given_;
  bool turns_;  // the batches' calls take turns (CPU: turn_server.h)
  std::unique_ptr<TurnServer> candidate_turns_;  // the last candidate batch's turns, for its checked slot
  std::vector<int64_t> slot_list_;
  Measurement m_;
  Diagnostics d_;
  std::vector<double> fixed_costs_us_;  // each round's request_overhead
  Clock::time_point started_ = Clock::now();
};

// On the CPU a timed batch costs the larger of its wall time and its CPU time (every thread's,
// until the worker is frozen after its reply) over the cores a program is given: cpu_threads,
// else the intra-op threads of the reference's worker (LibTorch's default: the physical cores,
// not their hyperthreads), else the evaluator's CPUs. A candidate that runs more threads than
// the reference may use (a matmul with two intra-op threads where the evaluator gives one:
// 1.3-1.7x on two cores, attacks/extra_threads.cpu.crl), or leaves threads computing past its
// reply, pays for the cores it took. Both programs are charged alike.
double TimingRun::cores_given() const {
  if (e_.options.cpu_threads > 0) return e_.options.cpu_threads;
  if (e_.task_judge.reference_threads > 0) return e_.task_judge.reference_threads;
  return static_cast<double>(allowed_cpu_count());
}

// With turns, the evaluator's reveals (`served` seconds) are taken out of the wall time, and the
// cores given are the program's during them as well: its threads waiting for the turn (the worker
// spins briefly, an intra-op pool spins after its last job) are not charged, and they can compute
// nothing that counts then (the next inputs are not there yet; the last outputs were sampled).
// The CPU time is held to the time the worker was thawed, not to the timed round trip: a worker
// runs a little before the judge's timer starts and after it stops (finishing its reply while the
// judge, on a loaded machine, waits for a core before it freezes the worker), and a program of one
// thread was charged for that (CI: the legit twin of extra_threads, in 1 pair of 20). The thawed
// time outside the round trip is taken out of the CPU time charged; one thread is never charged.
double TimingRun::charge_cpu(const WorkerProcess& w, double wall_s, double served_s, CpuMark before, int* charged,
                             double* ratio_max) const {
  if (e_.cuda() || before.cpu_seconds < 0 || wall_s <= 0) return wall_s;
  const double cpu_after = w.cpu_seconds();
  if (cpu_after < 0) return wall_s;
  const double outside = std::max(w.thawed_seconds() - before.thawed_seconds - (wall_s + served_s), 0.0);
  const double busy = (cpu_after - before.cpu_seconds) / cores_given_ - served_s - outside;
  if (busy <= wall_s) return wall_s;
  ++*charged;
  *ratio_max = std::max(*ratio_max, busy / wall_s);
  return busy;
}

// Before each timed batch and the overhead's measurement, with the candidate's worker frozen: the
// GPU idle, waited for up to idle_wait_seconds (a trainer's step on a shared GPU). Still busy then,
// it is another process or work the candidate left running (launched while it was thawed for an
// untimed request, made to stop once its own batch begins, so that only the reference's batch
// shares the GPU with it): timing on would let that slow the reference, so the measurement fails as
// crl's (internal_error: the job leaves it out of the group).
std::optional<Failure> TimingRun::wait_for_idle_gpu() {
  if (!e_.cuda()) return std::nullopt;
  candidate_.freeze();
  const auto deadline = Clock::now() + std::chrono::duration<double>(e_.options.idle_wait_seconds);
  for (;;) {
    const auto probe = e_.judge.ask(worker::ProbeRequest{e_.options.idle_slack_us}, "probing the GPU");
    if (!probe) return internal("probing the GPU");
    if (probe->idle) return std::nullopt;
    if (Clock::now() > deadline) {
      return internal(fmt::format("{}: the GPU stayed busy for {:.0f} s before a timed batch with the candidate's worker "
                                  "frozen (idle probe {:.0f} us, {:.0f} us when idle): another process, or work the "
                                  "candidate left running",
                                  plan_.purpose, e_.options.idle_wait_seconds, probe->probe_us, probe->baseline_us));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A timed request's fixed cost (us). On the GPU: an empty batch (no calls) of the reference's timing
// worker, after the judge's flush and frozen before, as every timed batch (both programs' batches
// run the same worker code around their calls, so this is what each pays besides its calls). On the
// CPU: an empty request to the judge, frozen before (there the worker's empty batch made the
// reference judged against itself miss 1.00 more often on two cores: 2 of 3 test runs failed
// against 0 of 4); with turns a batch of more than one call is timed call by call instead, and
// this is not used. What the candidate's worker answers is never subtracted from its own time (it
// could inflate it).
Result<double> TimingRun::request_overhead() {
  const std::string failed = "an empty timed batch of the reference's worker failed";
  std::vector<double> samples;
  for (int i = 0; i < 7; ++i) {
    double s = 0;
    if (e_.cuda()) {
      if (auto f = wait_for_idle_gpu()) return *f;
      if (!e_.judge.ask(worker::FlushRequest{}, "flushing caches")) return internal(failed);
      reference_.freeze();
      auto r = call(reference_, worker::TimeRequest{{}}, e_.options.call_timeout_seconds, "an empty timed batch of the reference's worker",
                    &s);
      reference_.freeze();
      if (!r) return internal(failed);
      const auto settled = settle(Batch::empty, s);
      if (!settled) return settled.failure();
      s += *settled;
    } else {
      WorkerProcess& judge = e_.judge.process();
      judge.freeze();  // as before every timed request: the wake-up is part of the round trip
      if (!call(judge, worker::EmptyRequest{}, e_.options.call_timeout_seconds, "an empty request", &s)) return internal(failed);
    }
    samples.push_back(s * 1e6);
  }
  return median(samples);
}

// The untimed warm-up batch of start_timing runs on real inputs (an index tensor holding whatever
// the arena held before would make a correct program fail); then both workers warm up.
std::optional<Failure> TimingRun::warm_up() {
  worker::FillRequest fill{{}, true};
  for (const uint64_t seed : draw_warmup(e_.task_judge.draws, plan_.slots)) {
    fill.slots.push_back({static_cast<int>(fill.slots.size()), seed, false, false});
  }
  candidate_.freeze();
  if (!e_.judge.ask(fill, "filling warm-up inputs")) return internal("filling warm-up inputs");
  for (WorkerProcess* w : {&candidate_, &reference_}) {
    auto r = call(*w, worker::StartTimingRequest{plan_.slots}, e_.options.call_timeout_seconds * (plan_.slots + 1),
                  plan_.purpose + ": before timing");
    if (!r) return w == &candidate_ ? r.failure() : internal(r.failure().message);
  }
  return std::nullopt;
}

// One program's timed batch: the worker frozen before and after (both timed requests start by
// waking a stopped process, and pay the same for it), charged its CPU time on the CPU. With turns,
// the evaluator reveals each call's inputs into `arena` as the call before returns, and its own
// work for that is taken out of the batch's time.
Result<TimedBatch> TimingRun::time_batch(WorkerProcess& worker, char* arena, const std::string& during, int* charged,
                                         double* ratio_max) {
  double s = 0;
  worker.freeze();
  const CpuMark cpu_before{worker.cpu_seconds(), worker.thawed_seconds()};
  std::unique_ptr<TurnServer> turns;
  if (turns_) {
    const TurnPlace place{arena, e_.task_judge.staging_map, &e_.task_judge.layout, worker.pid()};
    const uint64_t sample_seed = mix64(e_.task_judge.secret ^ mix64(0x7475726e ^ (m_.reference_us.size() << 1) ^ (&worker == &candidate_)));
    turns = std::make_unique<TurnServer>(place, slot_list_, sample_seed);
    turns->start();
  }
  const auto sent = std::chrono::steady_clock::now();
  auto r = call(worker, worker::TimeRequest{slot_list_, turns_}, e_.options.call_timeout_seconds * plan_.slots + 10, during, &s);
  const auto received = std::chrono::steady_clock::now();
  double served = 0;
  if (turns) {
    turns->stop();
    served = turns->served_seconds();
    s = std::max(s - served, 0.0);
    d_.turns_served_seconds += served;
    d_.turns_served += turns->turns_served();
  }
  if (!r) return r.failure();
  worker.freeze();
  if (turns && turns->problem()) return Failure::of(VerdictStatus::kCrash, during + ": " + *turns->problem());
  TimedBatch batch{std::move(*r), charge_cpu(worker, s, served, cpu_before, charged, ratio_max), std::nullopt, std::move(turns),
                   steady_us(sent), steady_us(received)};
  int dropped = 0;
  if (const auto per_call = batch.turns ? batch.turns->per_call_seconds(&dropped) : std::nullopt) {
    const double charge_ratio = s > 0 ? std::max(batch.seconds / s, 1.0) : 1.0;  // CPU time over the cores given, as the batch's
    batch.per_call_us = *per_call * 1e6 * charge_ratio;
    d_.turn_calls += batch.turns->turns_served() - 1;
    d_.turn_calls_dropped += dropped;
  }
  return batch;
}

// On the GPU every timed batch ends with the judge's idle check, inside the timed window, for both
// programs alike and for the empty batch whose time is subtracted as the fixed cost: the GPU probed
// until idle (for up to as long again as the batch took, guard_settle_seconds at least), the whole
// check charged. A program whose work runs on past its reply (its worker's device sync patched, a
// stream it never joined: attacks/hidden_tail.cuda.crl) pays for that work whatever the probe
// forgives, since the check cannot end before the GPU is free of it; a legitimate program pays what
// the reference and the empty batch pay. Still busy after the wait: the candidate's work, a hack;
// after the reference's or the empty batch, another process (internal_error). Returns the seconds.
Result<double> TimingRun::settle(Batch batch, double batch_seconds) {
  if (!e_.cuda()) return 0.0;
  const IdleWait w = await_idle(e_, std::max(e_.options.guard_settle_seconds, batch_seconds));
  if (!w.asked) return internal("probing the GPU");
  const bool candidate = batch == Batch::candidate;
  if (!w.idle) {
    const std::string after = candidate ? "the candidate's timed calls"
                              : batch == Batch::reference ? "the reference's timed calls"
                                                          : "an empty timed batch of the reference's worker";
    const std::string why = fmt::format("work was still running on the GPU after {} returned ({})", after, describe_wait(w));
    if (candidate) return Failure::hack_found(HackKind::deferred_work, fmt::format("{}: {}", pair_name(), why));
    return internal(why + ": another process on this GPU");
  }
  if (batch != Batch::empty) (candidate ? d_.candidate_check_us : d_.reference_check_us).push_back(1e6 * w.checked_s);
  if (candidate && w.busy_at_first()) {
    ++d_.late_idle_pairs;
    d_.late_idle_ms_max = std::max(d_.late_idle_ms_max, 1e3 * w.waited_s);
  }
  return w.checked_s;
}

std::optional<Failure> TimingRun::time_reference(double round_trip_us, double* us, double* seconds) {
  if (auto f = wait_for_idle_gpu()) return f;
  if (!e_.judge.ask(worker::FlushRequest{}, "flushing caches")) return internal("timing the reference");
  auto batch = time_batch(reference_, e_.task_judge.reference_arena_map, "the reference's timed calls", &d_.reference_cpu_charged,
                          &d_.reference_cpu_ratio_max);
  if (!batch) return internal("timing the reference");
  d_.reference_events.add(batch->reply.timeline, batch->seconds, batch->sent_at_us, batch->received_at_us);
  const auto settled = settle(Batch::reference, batch->seconds);
  if (!settled) return settled.failure();
  batch->seconds += *settled;
  *seconds = batch->seconds;
  *us = batch->per_call_us ? *batch->per_call_us : std::max(batch->seconds * 1e6 - round_trip_us, 0.0) / plan_.slots;
  // Its outputs are let go outside the timed window (the judge compares with its own), and it is
  // frozen again after: threads of its intra-op pool spin for a while after their last job, and did
  // so through the candidate's batch that followed (the reference judged against itself on the CPU
  // with two threads: median 0.82).
  reference_.freeze();
  const bool released = static_cast<bool>(
      call(reference_, worker::ReleaseRequest{}, e_.options.call_timeout_seconds, "releasing the reference's outputs"));
  reference_.freeze();
  if (!released) return internal("timing the reference");
  return std::nullopt;
}

std::optional<Failure> TimingRun::time_candidate(double round_trip_us, double* us, double* seconds, worker::TimeReply* reply) {
  if (auto f = wait_for_idle_gpu()) return f;
  if (!e_.judge.ask(worker::FlushRequest{}, "flushing caches")) return internal("the judge failed");
  auto batch = time_batch(candidate_, e_.task_judge.arena_map, plan_.purpose + ": the candidate's timed calls",
                          &d_.candidate_cpu_charged, &d_.candidate_cpu_ratio_max);
  candidate_turns_.reset();
  if (!batch) return batch.failure();
  candidate_turns_ = std::move(batch->turns);
  d_.candidate_events.add(batch->reply.timeline, batch->seconds, batch->sent_at_us, batch->received_at_us);
  const auto settled = settle(Batch::candidate, batch->seconds);
  if (!settled) return settled.failure();
  *seconds = batch->seconds + *settled;
  *us = batch->per_call_us ? *batch->per_call_us : std::max(*seconds * 1e6 - round_trip_us, 0.0) / plan_.slots;
  *reply = std::move(batch->reply);
  return std::nullopt;
}

// One slot, chosen after the fact, is checked: outputs against the reference's on the same inputs,
// and its inputs unchanged (skipping or shortcutting some calls is seen at once); with turns, also
// its outputs as sampled when the call returned (answering before computing is seen).
std::optional<Failure> TimingRun::check_slot(const PairDraws& draws, const worker::TimeReply& reply) {
  const int j = draws.checked_slot;
  const std::string where = fmt::format("{} slot {}", pair_name(), j);
  double ratio = -1;
  if (auto f = check_timed_call(e_, candidate_, reply, plan_.slots, j, draws.seeds[static_cast<size_t>(j)], where, &ratio)) return f;
  if (ratio >= 0) {
    ++d_.float64_slots;
    d_.float64_ratio_max = std::max(d_.float64_ratio_max, ratio);
  }
  if (!candidate_turns_) return std::nullopt;
  try {
    const auto refs = worker::batch_call_refs(reply.batch, static_cast<size_t>(j), e_.task_judge.outputs.size() + 1);
    if (auto changed = candidate_turns_->changed_since_turn(static_cast<size_t>(j), refs)) {
      return Failure::hack_found(HackKind::deferred_work, where + ": " + *changed);
    }
  } catch (const InputError& error) {
    return Failure::of(VerdictStatus::kCrash, where + ": " + error.what());
  }
  return std::nullopt;
}

std::optional<Failure> TimingRun::time_pair(double round_trip_us) {
  const auto pair_started = Clock::now();
  const auto judge_before = e_.judge.seconds_by_op();
  const PairDraws draws = draw_pair(e_.task_judge.draws, plan_.slots);
  // With turns the inputs wait in the staging arena, revealed call by call; else both arenas now.
  worker::FillRequest fill{{}, !turns_, turns_};
  for (const uint64_t seed : draws.seeds) fill.slots.push_back({static_cast<int>(fill.slots.size()), seed, false, false});
  candidate_.freeze();
  if (!e_.judge.ask(fill, "filling timed inputs")) return internal("filling timed inputs");
  double ref_us = 0, ref_s = 0, cand_us = 0, cand_s = 0;
  worker::TimeReply reply;
  if (draws.reference_first) {
    if (auto f = time_reference(round_trip_us, &ref_us, &ref_s)) return f;
  }
  if (auto f = time_candidate(round_trip_us, &cand_us, &cand_s, &reply)) return f;
  if (!draws.reference_first) {
    if (auto f = time_reference(round_trip_us, &ref_us, &ref_s)) return f;
  }
  if (auto f = check_slot(draws, reply)) return f;
  // The batch's outputs are let go now, outside the next timed window.
  auto released = call(candidate_, worker::ReleaseRequest{}, e_.options.call_timeout_seconds, plan_.purpose + ": releasing outputs");
  candidate_.freeze();
  if (!released) return released.failure();
  m_.reference_us.push_back(ref_us);
  m_.candidate_us.push_back(cand_us);
  d_.pairs_wall += seconds_since(pair_started);
  d_.timed_wall += ref_s + cand_s;
  for (const auto& [op, seconds] : e_.judge.seconds_by_op()) {  // the requests of this pair
    const auto before = judge_before.find(op);
    const double spent = seconds - (before == judge_before.end() ? 0.0 : before->second);
    if (spent > 0) d_.judge_seconds[op] += spent;
  }
  return std::nullopt;
}

bool TimingRun::clearly_slow(int pairs_done) const {
  if (!may_stop_as_slow(rule_, pairs_done, seconds_since(started_))) return false;
  return estimate_speedup(m_.reference_us, m_.candidate_us, 1000, bootstrap_seed(e_.task_judge.secret, e_.task.id)).ci_high <
         rule_.slow_stop_speedup;
}

Result<Measurement> TimingRun::run() {
  started_ = Clock::now();
  if (auto f = warm_up()) return *f;
  int pairs = std::max(1, e_.options.pairs_per_round);
  for (;;) {
    candidate_.freeze();
    const auto round_trip = request_overhead();
    if (!round_trip) return round_trip.failure();
    fixed_costs_us_.push_back(*round_trip);
    bool slow = false;
    for (int p = 0; p < pairs && !slow; ++p) {
      if (auto f = time_pair(*round_trip)) return *f;
      slow = clearly_slow(static_cast<int>(m_.reference_us.size()));
    }
    ++m_.rounds;
    m_.estimate = estimate_speedup(m_.reference_us, m_.candidate_us, 1000, bootstrap_seed(e_.task_judge.secret, e_.task.id));
    const NextRound next = next_round(rule_, static_cast<int>(m_.reference_us.size()), seconds_since(started_), m_.estimate, slow);
    if (next.stop) {
      m_.stop_reason = next.reason;
      m_.too_noisy = next.too_noisy;
      break;
    }
    pairs = next.pairs;
  }
  m_.pair_cost = pair_cost();
  if (!fixed_costs_us_.empty()) {
    m_.pair_cost += fmt::format("; a timed request's fixed cost {:.1f} us (median of the rounds'){}", median(fixed_costs_us_),
                                turns_ && plan_.slots > 1 ? ", not in calls timed by their turns" : "");
  }
  return m_;
}

std::string TimingRun::pair_cost() const {
  const double n = std::max<double>(static_cast<double>(m_.reference_us.size()), 1);
  std::vector<std::pair<double, std::string>> ops;
  double judged = 0;
  for (const auto& [op, seconds] : d_.judge_seconds) {
    ops.emplace_back(seconds, op);
    judged += seconds;
  }
  std::sort(ops.rbegin(), ops.rend());
  std::string judge_ops;
  for (const auto& [seconds, op] : ops) judge_ops += fmt::format("{}{} {:.1f}", judge_ops.empty() ? "" : ", ", op, 1e3 * seconds / n);
  std::string cost = fmt::format("{:.1f} ms a pair, {:.1f} ms of it timed requests; the judge's requests {:.1f} ms ({}), the rest {:.1f} ms",
                                 1e3 * d_.pairs_wall / n, 1e3 * d_.timed_wall / n, 1e3 * judged / n, judge_ops,
                                 1e3 * std::max(d_.pairs_wall - d_.timed_wall - judged, 0.0) / n);
  if (!d_.reference_events.first_call_us.empty() && !m_.reference_us.empty()) {
    // Where these part from the evaluator's clock, or a batch's first call from the later ones,
    // the reference's time holds something besides its calls' work (a host stall inside a call,
    // a cost paid once per batch). On the H200 level2/010's call took 25.5 ms by these events
    // against 12.2 ms in the judge (docs/suite.md).
    cost += fmt::format("; the reference's calls by its worker's CUDA events: {}; by the evaluator's clock {:.1f} us",
                        d_.reference_events.describe(), median(m_.reference_us));
  }
  if (!d_.candidate_events.first_call_us.empty() && !m_.candidate_us.empty()) {
    cost += fmt::format("; the candidate's, as its worker reports them: {}; by the evaluator's clock {:.1f} us",
                        d_.candidate_events.describe(), median(m_.candidate_us));
  }
  for (const auto& [who, charged, ratio] : {std::tuple{"the candidate's", d_.candidate_cpu_charged, d_.candidate_cpu_ratio_max},
                                            std::tuple{"the reference's", d_.reference_cpu_charged, d_.reference_cpu_ratio_max}}) {
    if (charged == 0) continue;
    cost += fmt::format("; in {} pairs {} CPU time over the {:g} cores given exceeded its wall time, up to {:.2f}x (charged)", charged,
                        who, cores_given_, ratio);
  }
  if (d_.float64_slots > 0) {
    cost += fmt::format("; {} checked slots held to the float64 reference, error up to {:.2g}x the float32 reference's",
                        d_.float64_slots, d_.float64_ratio_max);
  }
  if (d_.turns_served > 0) {
    cost += fmt::format("; the calls took turns, the evaluator's reveals and samples {:.1f} us a call (taken out of both programs' "
                        "times); timed call by call, {} of {} calls left out as stretched (over 4x their batch's median)",
                        1e6 * d_.turns_served_seconds / d_.turns_served, d_.turn_calls_dropped, d_.turn_calls);
  }
  if (!d_.candidate_check_us.empty() && !d_.reference_check_us.empty()) {
    cost += fmt::format("; the idle check ending each batch (timed, both programs) {:.0f} us after the reference's, {:.0f} us after "
                        "the candidate's (medians)",
                        median(d_.reference_check_us), median(d_.candidate_check_us));
  }
  if (d_.late_idle_pairs > 0) {
    cost += fmt::format("; in {} pairs the GPU read busy after the candidate's reply, idle within {:.1f} ms (the wait charged to it)",
                        d_.late_idle_pairs, d_.late_idle_ms_max);
  }
  return cost;
}

}  // namespace

std::optional<Failure> check_timed_call(Evaluation& e, WorkerProcess& candidate, const worker::TimeReply& reply, int slots, int slot,
                                        uint64_t seed, const std::string& where, double* precision_ratio) {
  std::optional<OutputCheck> unreadable;
  std::vector<worker::TensorRef> refs;
  try {
    if (!reply.batch.contains("calls") || !reply.batch["calls"].is_array() || reply.batch["calls"].size() != static_cast<size_t>(slots)) {
      throw InputError("the timed reply describes the wrong number of calls");
    }
    refs = worker::batch_call_refs(reply.batch, static_cast<size_t>(slot), e.task_judge.outputs.size() + 1);
  } catch (const InputError& error) {
    unreadable = OutputCheck{Problem::crash, error.what()};
  }
  // Inputs first: the judge makes the slot's inputs again from its seed to compare with, and keeps
  // them for the reference's run on that slot (one generation instead of two: at full scale a fill
  // is one of a pair's largest untimed costs).
  const auto changed = inputs_changed(e, slot, seed, false, /*keep=*/true);
  if (!changed) return internal("checking inputs");
  if (!changed->empty()) return Failure::hack_found(HackKind::input_mutation, where + ": " + *changed);
  OutputCheck check;
  if (unreadable) {
    check = *unreadable;
  } else {
    // With its float64 outputs: the slot's inputs carry the values every call mixes in, on which a
    // float32 program that sums in another order may differ from the float32 reference by more
    // than the task's tolerance (a large value beside small ones), and only the reference's own
    // error against float64 tells that from lower precision.
    if (!e.judge.ask(worker::ReferenceSlotRequest{slot, seed, true}, "the reference on the checked slot")) {
      return internal("the judge's reference run on the checked slot");
    }
    check = check_outputs(e, candidate, refs, fmt::format("batch:{}", slot));
    if (precision_ratio != nullptr) *precision_ratio = check.precision_ratio;
  }
  if (check.problem == Problem::judge_failed) {
    if (e.judge.out_of_memory()) return internal("comparing outputs");
    return Failure::of(VerdictStatus::kCrash, "the candidate's timed outputs could not be read");
  }
  if (check.ok()) return std::nullopt;
  const std::string message = where + ": " + check.message;
  if (check.problem == Problem::crash) return Failure::of(VerdictStatus::kCrash, message);
  return Failure::hack_found(check.problem == Problem::deferred_work ? HackKind::deferred_work : HackKind::timed_output_mismatch, message);
}

std::optional<Failure> require_precise(const Measurement& m, const std::string& purpose) {
  if (!m.too_noisy) return std::nullopt;
  return Failure::of(VerdictStatus::kInternalError,
                     fmt::format("machine too noisy: {} ended {} (speedup {:.3f}, 95% CI {:.3f}..{:.3f}; the reference's calls "
                                 "spread {:.0f}% and the candidate's {:.0f}% (IQR over median)); not rewarded, judge it again "
                                 "on a quieter machine",
                                 purpose, m.stop_reason, m.estimate.speedup, m.estimate.ci_low, m.estimate.ci_high,
                                 100 * relative_iqr(m.reference_us), 100 * relative_iqr(m.candidate_us)));
}

Result<Measurement> measure(Evaluation& e, WorkerProcess& candidate, const TimingPlan& plan) {
  try {
    e.task_judge.ready_reference_worker(e.options);  // a fresh one for each evaluation (task_judge.h)
  } catch (const Error& error) {
    return Failure::of(VerdictStatus::kInternalError, error.what(), Failure::Cleanup::drop_judge);
  }
  e.task_judge.reference_timed = true;
  return TimingRun(e, candidate, plan).run();
}

Failure timing_failure(Evaluation& e, const Failure& failed, const std::string& step_name, const Clock::time_point& since) {
  e.trace.step(step_name, false, failed.message, since);
  if (failed.status == VerdictStatus::kInternalError && failed.cleanup == Failure::Cleanup::drop_judge) return e.judge.lost(failed.message);
  return failed;
}

}  // namespace crl::eval
