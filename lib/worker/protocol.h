// The typed protocol between the evaluator and crl-worker: one enum of operations, one struct per
// request and reply, each written to and read from the channel's JSON strictly (a missing or
// mistyped field is an InputError naming the operation and the field, never a default: a field read
// with a default is a guard that turns itself off when the other side forgets to send it).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "worker/exchange.h"

namespace crl::worker {

enum class Op {
  load,            // both roles: the task's spec and one program library
  arena,           // make (GPU: allocate and export) or map (CPU: the evaluator's memfd) the input arena
  adopt_arena,     // judge, GPU: map a worker's arena by its IPC handle
  drop_arena,      // judge, GPU: let go of a worker's arena before that worker ends
  fill,            // judge: write inputs made from seeds into arena slots
  run,             // program worker: one call on a slot's inputs, or on inputs made from a seed
  time,            // program worker: one call per slot back to back, the timed batch
  start_timing,    // program worker: an untimed warm-up batch (or, cuda_graph, the captures)
  guard,           // candidate worker: the hack-guard probes (guard_probe.h)
  reference,       // judge: run the reference on a seed's inputs and keep its outputs under a key
  reference_slot,  // judge: the reference on a timed slot's inputs, kept as batch:<slot>
  batch_copy,      // judge: whether a program copying one sample across the batch would pass
  call_time,       // judge: the reference's time per call, for sizing timed batches
  compare,         // judge: a program's outputs against the reference outputs under a key
  check_inputs,    // judge: whether a slot's inputs still hold what their seed makes
  probe,           // judge: whether the GPU is idle
  values,          // judge: which values the task's arguments mix in (program/value_mix.h), by its domain probe
  flush,           // judge: write a buffer of twice the cache, before each timed batch
  release,         // let go of outputs described (and, judge, what it maps of the worker)
  memory_share,    // both roles, GPU: this process's share of the card from now on (eval/memory_plan.h)
  empty,           // judge: an empty request (a timed request's fixed cost on the CPU)
  quit,            // end the worker
};

std::string_view op_name(Op op);
Op parse_op(std::string_view name);  // InputError for an unknown name

// A strict reader of one message's fields; `what` names the message in errors ("reply to 'fill'").
class Fields {
 public:
  Fields(const nlohmann::json& json, std::string what);
  bool has(const char* key) const;
  const nlohmann::json& at(const char* key) const;  // present, any type
  std::string text(const char* key) const;
  bool flag(const char* key) const;
  double number(const char* key) const;
  int64_t integer(const char* key) const;
  uint64_t unsigned_integer(const char* key) const;
  int int32(const char* key) const;
  std::vector<int64_t> integers(const char* key) const;
  std::vector<uint64_t> unsigned_integers(const char* key) const;
  std::vector<std::string> texts(const char* key) const;
  const nlohmann::json& array(const char* key) const;
  const nlohmann::json& object(const char* key) const;
  const std::string& what() const { return what_; }

 private:
  [[noreturn]] void wrong(const char* key, const char* expected) const;
  const nlohmann::json& json_;
  std::string what_;
};

// ---- replies shared by several operations -------------------------------------------------------

struct NoReply {
  nlohmann::json to_json() const { return nlohmann::json::object(); }
  static NoReply from(const Fields&) { return {}; }
};

// An output as the judge describes the reference's: its shape, dtype and where it lies.
struct OutputMeta {
  TensorMeta meta;
  std::string device;  // "cpu" | "cuda"
  bool operator==(const OutputMeta&) const = default;
};

// ---- requests, each with its reply --------------------------------------------------------------

// Device settings of a load: which device, the caching allocator's cap, intra-op threads.
struct DeviceSettings {
  std::string device = "cpu";       // "cpu" | "cuda"
  double gpu_memory_fraction = 0;   // 0: no cap
  int cpu_threads = 0;              // 0: LibTorch's default
  std::string precision = "fp32";   // "fp32" | "tf32" (program/run_settings.h), the same for every worker of an evaluation
  // A program worker on a card whose processes take turns (eval/memory_plan.h): its allocator's free
  // blocks go back after every request but the timed ones.
  bool release_after_requests = false;
};

// A KernelBench-format candidate's torch.utils.cpp_extension.load_inline call, as its worker recorded
// it: the evaluator's compiler builds it (the worker cannot start a compiler) and the next worker
// imports the result. `key` is the worker's name for the call (a hash of the rest); a worker that
// lies about it only fails to find its own module.
struct ExtensionBuild {
  std::string key, name, cpp_sources, cuda_sources;
  std::vector<std::string> functions;
  bool bindings = true;  // false: load_inline got no `functions` (the sources bind their own)
  std::vector<std::string> extra_cflags, extra_cuda_cflags, extra_ldflags;
  nlohmann::json to_json() const;
  static ExtensionBuild from(const Fields& f);
};
// A built extension given to a worker: the call's key and the module's library (in the worker's folder).
struct BuiltExtension {
  std::string key, library;
  // Non-empty: crl's compiler failed to build it (its stage and log); the module's load_inline then
  // raises, as torch's does, and a module that catches it runs its own fallback.
  std::string error;
  nlohmann::json to_json() const;
  static BuiltExtension from(const Fields& f);
};
// At most this many load_inline calls in one load (CUDA-L1's modules make one or two).
inline constexpr size_t kMaxExtensionBuilds = 16;

struct LoadReply {
  int num_args = 0;
  std::vector<TensorMeta> arguments;  // judge: one slot's arguments (the arena's layout)
  double probe_baseline_us = 0;       // judge, GPU: the idle probe's time on an idle GPU
  std::string device_name;            // judge: the GPU's name ("" on the CPU)
  int intra_op_threads = 0;           // program worker: LibTorch's intra-op threads there
  // A KernelBench-format candidate whose module called load_inline for extensions it was not given:
  // nothing is loaded; the evaluator builds these and loads the candidate in a fresh worker.
  std::vector<ExtensionBuild> needs_builds;
  nlohmann::json to_json() const;
  static LoadReply from(const Fields& f);
};
struct LoadRequest {
  static constexpr Op op = Op::load;
  using Reply = LoadReply;
  std::string reference_program;  // the task's .crl file (its spec)
  std::string library;            // the program to load: the reference's (judge) or the worker's program
  std::string program_kind = "crl";  // "kernelbench": no library; python_source is the candidate's module
  std::string python_source;
  std::string origin;              // the candidate's name in messages (its file or JSONL line)
  std::vector<BuiltExtension> extensions;  // kernelbench: its load_inline calls built so far
  std::string scale;
  DeviceSettings device;
  int64_t cache_bytes = 0;         // judge: reference outputs it keeps
  std::string program_name;        // "candidate", or "reference" for the reference's timing worker
  bool replay_as_graph = false;    // the reference's timing worker under baseline cuda_graph
  // The values every call's arguments mix in (program/value_mix.h: MixKind bits per argument), as the
  // judge decided them: the candidate's worker makes its guards' inputs with them. Empty for the judge
  // (it decides) and the reference's timing worker (it makes no inputs).
  std::vector<uint32_t> value_mix;
  // KernelBench's rule for parameters (docs/evaluation.md, "Parameters"): 0 for crl's. Otherwise the
  // judge builds KernelBench's Model from `kernelbench_model` under this seed and every call's params
  // hold its values; a KernelBench-format candidate builds its ModelNew under the same seed.
  uint64_t kernelbench_seed = 0;
  std::string kernelbench_model;   // judge: the task's KernelBench module (a checkout's; trusted)
  // kernelbench: the class to build, "ModelNew", or "Model" where the reference's timing worker times
  // KernelBench's own module (baseline kernelbench).
  std::string python_class = "ModelNew";
  nlohmann::json to_json() const;
  static LoadRequest from(const Fields& f);
};

struct ArenaReply {
  std::string ipc_handle;  // GPU: the arena's handle for the judge; "" on the CPU
  nlohmann::json to_json() const;
  static ArenaReply from(const Fields& f);
};
struct ArenaRequest {
  static constexpr Op op = Op::arena;
  using Reply = ArenaReply;
  ArenaLayout layout;
  uint64_t output_region_bytes = 0;  // judge, CPU: the region the evaluator copies outputs into
  nlohmann::json to_json() const;
  static ArenaRequest from(const Fields& f);
};

enum class ArenaOwner { candidate, reference };
std::string_view arena_owner_name(ArenaOwner owner);

struct AdoptArenaReply {
  bool adopted = false;
  std::string message;  // why not
  nlohmann::json to_json() const;
  static AdoptArenaReply from(const Fields& f);
};
struct AdoptArenaRequest {
  static constexpr Op op = Op::adopt_arena;
  using Reply = AdoptArenaReply;
  ArenaOwner which = ArenaOwner::candidate;
  std::string ipc_handle;
  nlohmann::json to_json() const;
  static AdoptArenaRequest from(const Fields& f);
};

struct DropArenaRequest {
  static constexpr Op op = Op::drop_arena;
  using Reply = NoReply;
  ArenaOwner which = ArenaOwner::candidate;
  nlohmann::json to_json() const;
  static DropArenaRequest from(const Fields& f);
};

// Inputs for one slot: made from `seed` (edge values where `edges`; samples scaled apart where `spread`).
struct SlotFill {
  int slot = 0;
  uint64_t seed = 0;
  bool edges = false;
  bool spread = false;
};
struct FillRequest {
  static constexpr Op op = Op::fill;
  using Reply = NoReply;
  std::vector<SlotFill> slots;
  bool both = false;  // into the reference worker's arena too (timed inputs: a copy for each program)
  // CPU: into the staging arena only, from where the evaluator reveals each slot to a program at
  // its call's turn (call_turns.h); neither program's arena is written.
  bool staged = false;
  nlohmann::json to_json() const;
  static FillRequest from(const Fields& f);
};

struct RunReply {
  std::vector<TensorRef> outputs;
  nlohmann::json to_json() const;
  static RunReply from(const Fields& f);
};
// One call: on a slot of the arena, or (the per-sample guard) on inputs made from a seed.
struct RunRequest {
  static constexpr Op op = Op::run;
  using Reply = RunReply;
  std::optional<int> slot;
  uint64_t seed = 0;            // when no slot
  bool spread_samples = false;  // when no slot: each sample's inputs scaled by its own factor
  nlohmann::json to_json() const;
  static RunRequest from(const Fields& f);
};

// The reference worker's own view of a timed batch (a diagnostic; a candidate could fake its own).
struct BatchTimelineSummary {
  std::optional<double> first_call_device_us, first_call_host_us, later_call_device_us, later_call_host_us;
  // The worker's own host clock from the request's arrival to its reply, and of that the part after
  // the calls and their sync (describing the outputs): where a request's time goes besides the calls.
  std::optional<double> served_us, describe_us;
  // When the request arrived and when its outputs were described, on the host's monotonic clock
  // (CLOCK_MONOTONIC, one clock for every process of the host), in microseconds: with the
  // evaluator's own send and receive times they split the request's time outside the worker into
  // before (waking the frozen worker, the request's way in) and after (the reply's way out).
  std::optional<double> arrived_at_us, described_at_us;
  nlohmann::json to_json() const;
  static BatchTimelineSummary from(const Fields& f);
};
struct TimeReply {
  nlohmann::json batch;  // describe_batch's description of every call's outputs (batch_call_refs validates it)
  BatchTimelineSummary timeline;
  nlohmann::json to_json() const;
  static TimeReply from(const Fields& f);
};
struct TimeRequest {
  static constexpr Op op = Op::time;
  using Reply = TimeReply;
  std::vector<int64_t> slots;  // empty: the empty batch (a timed request's fixed cost)
  bool turns = false;          // CPU: each call waits for its turn on the arena's turn page (call_turns.h)
  nlohmann::json to_json() const;
  static TimeRequest from(const Fields& f);
};

struct StartTimingRequest {
  static constexpr Op op = Op::start_timing;
  using Reply = NoReply;
  int slots = 0;
  nlohmann::json to_json() const;
  static StartTimingRequest from(const Fields& f);
};

// A check the candidate's worker judged alone (threads, aliasing ...): failed, it is hack:<kind>.
struct GuardCheck {
  std::string name;
  bool passed = false;
  std::string kind;
  std::string detail;
};
// Consecutive outputs the judge compares with the reference's for trial seed `seed_index` (0 or 1).
struct GuardGroup {
  std::string name;
  std::string kind;
  int seed_index = 0;
  int64_t count = 0;
};
struct GuardReply {
  std::vector<GuardCheck> checks;
  std::vector<GuardGroup> groups;
  std::vector<TensorRef> outputs;  // the groups' outputs, in order
  nlohmann::json to_json() const;
  static GuardReply from(const Fields& f);
};
struct GuardRequest {
  static constexpr Op op = Op::guard;
  using Reply = GuardReply;
  std::vector<uint64_t> seeds;       // two trial seeds, A and B
  std::vector<int64_t> output_bytes; // the reference's output sizes (what free memory is poisoned at)
  double settle_seconds = 0;         // the wait before outputs are looked at again
  // Which probes: 1, the first call and new values at the same addresses; 2, the same values at
  // new addresses; 3, the stale-memory probe. Three requests, so that each part's outputs are
  // compared and let go before the next allocates (at full scale four sets of held outputs and
  // two copies did not fit a worker's share of an 80 GB card).
  int part = 1;
  nlohmann::json to_json() const;
  static GuardRequest from(const Fields& f);
};

struct ReferenceReply {
  std::vector<OutputMeta> outputs;
  int64_t spread_inputs = 0;  // inputs scaled apart (0: none could be)
  // Asked for float64 outputs: "" when held for every float32 output, else why not (the reference
  // does not run in float64, not even in chunks of samples within the judge's memory).
  std::string float64_missing;
  nlohmann::json to_json() const;
  static ReferenceReply from(const Fields& f);
};
struct ReferenceRequest {
  static constexpr Op op = Op::reference;
  using Reply = ReferenceReply;
  std::string key;  // trial:<i>, edge:<i>, spread
  uint64_t seed = 0;
  bool edges = false;
  bool spread = false;
  bool float64 = false;  // also hold the reference's float64 outputs, for the precision contract
  nlohmann::json to_json() const;
  static ReferenceRequest from(const Fields& f);
};

struct ReferenceSlotRequest {
  static constexpr Op op = Op::reference_slot;
  using Reply = NoReply;
  int slot = 0;
  uint64_t seed = 0;
  bool float64 = false;  // the float64 outputs too (a pair whose checked slot the precision contract covers)
  nlohmann::json to_json() const;
  static ReferenceSlotRequest from(const Fields& f);
};

struct BatchCopyReply {
  bool would_pass = false;
  nlohmann::json to_json() const;
  static BatchCopyReply from(const Fields& f);
};
struct BatchCopyRequest {
  static constexpr Op op = Op::batch_copy;
  using Reply = BatchCopyReply;
  std::string key;
  nlohmann::json to_json() const;
  static BatchCopyRequest from(const Fields& f);
};

struct CallTimeReply {
  double call_us = 0;
  // GPU: what one call of the reference allocated at its peak beyond its arguments (outputs and
  // temporaries, the caching allocator's count) and the card's memory: the evaluator's memory plan.
  int64_t peak_bytes = 0;
  int64_t card_bytes = 0;
  nlohmann::json to_json() const;
  static CallTimeReply from(const Fields& f);
};
struct CallTimeRequest {
  static constexpr Op op = Op::call_time;
  using Reply = CallTimeReply;
  uint64_t seed = 0;
  int repeats = 3;
  nlohmann::json to_json() const;
  static CallTimeRequest from(const Fields& f);
};

struct CompareReply {
  bool match = false;  // ("match", not "ok": a reply's "ok" says whether the request itself succeeded)
  std::string message;
  double max_abs_error = 0;
  // The precision contract: the largest, over the float32 outputs, of the candidate's error against
  // the float64 reference over the float32 reference's own (output_comparison.h); -1: no float64
  // reference was held for these outputs.
  double precision_ratio = -1;
  nlohmann::json to_json() const;
  static CompareReply from(const Fields& f);
};
struct CompareRequest {
  static constexpr Op op = Op::compare;
  using Reply = CompareReply;
  std::string key;
  std::vector<TensorRef> outputs;  // CPU outputs: offsets into the output region
  nlohmann::json to_json() const;
  static CompareRequest from(const Fields& f);
};

struct CheckInputsReply {
  std::vector<int64_t> changed;  // indices of arguments that no longer hold their seed's values
  nlohmann::json to_json() const;
  static CheckInputsReply from(const Fields& f);
};
struct CheckInputsRequest {
  static constexpr Op op = Op::check_inputs;
  using Reply = CheckInputsReply;
  int slot = 0;
  uint64_t seed = 0;
  bool edges = false;
  bool spread = false;
  bool keep = false;  // keep the inputs made for a reference_slot of the same seed next
  nlohmann::json to_json() const;
  static CheckInputsRequest from(const Fields& f);
};

struct ProbeReply {
  bool idle = true;
  double probe_us = 0;         // the deciding reading
  double first_probe_us = 0;   // pays any switch between contexts
  double second_probe_us = 0;
  int retries = 0;
  double baseline_us = 0;      // an idle GPU's reading
  nlohmann::json to_json() const;
  static ProbeReply from(const Fields& f);
};
struct ProbeRequest {
  static constexpr Op op = Op::probe;
  using Reply = ProbeReply;
  double slack_us = 0;
  nlohmann::json to_json() const;
  static ProbeRequest from(const Fields& f);
};

// The judge's domain probe: which of the eligible values (MixKind bits per argument) the reference
// is defined on. Each is kept when the reference, run on `seed`'s arguments with it mixed in at
// kProbeShare, gives no more NaN than on the plain arguments (a log of negative values, a variance
// drawn negative); the judge then makes every argument set with what it kept.
struct ValuesReply {
  std::vector<uint32_t> kinds;  // kept, per argument
  int runs = 0;                 // reference runs the probe took
  std::string dropped;          // what it dropped and why ("" when nothing)
  nlohmann::json to_json() const;
  static ValuesReply from(const Fields& f);
};
struct ValuesRequest {
  static constexpr Op op = Op::values;
  using Reply = ValuesReply;
  uint64_t seed = 0;
  std::vector<uint32_t> eligible;  // per argument: what the spec allows (program/value_mix.h: eligible_mix)
  nlohmann::json to_json() const;
  static ValuesRequest from(const Fields& f);
};

// Requests without fields.
template <Op kOp>
struct BareRequest {
  static constexpr Op op = kOp;
  using Reply = NoReply;
  nlohmann::json to_json() const { return nlohmann::json::object(); }
  static BareRequest from(const Fields&) { return {}; }
};
// The process's share of the GPU's memory from now on, its arena included (the evaluator's memory
// plan, eval/memory_plan.h); the judge also keeps at most `cache_bytes` of reference outputs and, with
// `release_after_requests`, hands its allocator's free blocks back after every request (its peaks and
// the workers' then take turns on a card too small for all three at once).
struct MemoryShareRequest {
  static constexpr Op op = Op::memory_share;
  using Reply = NoReply;
  double gpu_memory_fraction = 0;
  int64_t cache_bytes = -1;  // -1: unchanged
  bool release_after_requests = false;
  nlohmann::json to_json() const;
  static MemoryShareRequest from(const Fields& f);
};

using FlushRequest = BareRequest<Op::flush>;
using ReleaseRequest = BareRequest<Op::release>;
using EmptyRequest = BareRequest<Op::empty>;
using QuitRequest = BareRequest<Op::quit>;

// ---- the wire -----------------------------------------------------------------------------------

// A request as it crosses: {"op": name, fields...}.
template <typename Request>
nlohmann::json encode_request(const Request& request) {
  nlohmann::json j = request.to_json();
  j["op"] = std::string(op_name(Request::op));
  return j;
}
// The op of a request as it arrived (InputError when absent or unknown).
Op request_op(const nlohmann::json& request);
template <typename Request>
Request decode_request(const nlohmann::json& request) {
  return Request::from(Fields(request, "request '" + std::string(op_name(Request::op)) + "'"));
}

// A reply: {"ok": true, fields...}, or the failure {"ok": false, "error", "sticky", "out_of_memory",
// "device_short", "status"}.
struct ErrorReply {
  std::string error;
  bool sticky = false;         // a sticky CUDA error: the worker exits after this reply
  bool out_of_memory = false;  // the device ran out of memory (the judge's own, when it says so)
  bool device_short = false;   // ... while the worker was within its share: the others took too much
  // The candidate's fault in verdict terms, where the worker knows it ("format_error", "compile_error":
  // a KernelBench-format module that is no ModelNew crl can judge, or does not import); "" otherwise.
  // Both end in a verdict of reward 0, as a runtime error does: a program that forges one gains nothing.
  std::string status;
};
template <typename Reply>
nlohmann::json encode_reply(const Reply& reply) {
  nlohmann::json j = reply.to_json();
  j["ok"] = true;
  return j;
}
nlohmann::json encode_error(const ErrorReply& error);
// A session's answer to one request: decoded strictly as Request, served by session.on, encoded.
template <typename Request, typename Session>
nlohmann::json answer(Session& session, const nlohmann::json& request) {
  return encode_reply(session.on(decode_request<Request>(request)));
}
// A reply as it arrived: the failure when "ok" is false, else nothing (then decode_reply reads it).
std::optional<ErrorReply> reply_error(const nlohmann::json& reply, Op op);
template <typename Reply>
Reply decode_reply(const nlohmann::json& reply, Op op) {
  return Reply::from(Fields(reply, "reply to '" + std::string(op_name(op)) + "'"));
}

}  // namespace crl::worker
