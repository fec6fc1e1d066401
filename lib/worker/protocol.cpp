// The worker protocol's operations and the strict reading and writing of every request and reply.
#include "worker/protocol.h"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "core/error.h"

namespace crl::worker {
namespace {

// Outputs a reply or request may describe, at most (a bound before anything is allocated for them).
constexpr size_t kMaxOutputs = 1024;

constexpr std::array<std::pair<Op, std::string_view>, 22> kOpNames = {{
    {Op::load, "load"},
    {Op::arena, "arena"},
    {Op::adopt_arena, "adopt_arena"},
    {Op::drop_arena, "drop_arena"},
    {Op::fill, "fill"},
    {Op::run, "run"},
    {Op::time, "time"},
    {Op::start_timing, "start_timing"},
    {Op::guard, "guard"},
    {Op::reference, "reference"},
    {Op::reference_slot, "reference_slot"},
    {Op::batch_copy, "batch_copy"},
    {Op::call_time, "call_time"},
    {Op::compare, "compare"},
    {Op::check_inputs, "check_inputs"},
    {Op::probe, "probe"},
    {Op::values, "values"},
    {Op::flush, "flush"},
    {Op::release, "release"},
    {Op::memory_share, "memory_share"},
    {Op::empty, "empty"},
    {Op::quit, "quit"},
}};

nlohmann::json metas_json(const std::vector<TensorMeta>& metas) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : metas) out.push_back(to_json(m));
  return out;
}

nlohmann::json refs_json(const std::vector<TensorRef>& refs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : refs) out.push_back(to_json(r));
  return out;
}

// A nested object's reader, named after its parent's field and index.
Fields element(const Fields& parent, const nlohmann::json& item, const char* key, size_t index) {
  return Fields(item, fmt::format("{}, {}[{}]", parent.what(), key, index));
}

ArenaOwner parse_owner(const Fields& f) {
  const std::string which = f.text("which");
  if (which == "candidate") return ArenaOwner::candidate;
  if (which == "reference") return ArenaOwner::reference;
  throw InputError(fmt::format("{}: an arena is the candidate's or the reference's, not '{}'", f.what(), which));
}

std::vector<TensorRef> parse_refs(const Fields& f, const char* key) {
  try {
    return tensor_refs_from_json(f.array(key), kMaxOutputs);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: field '{}': {}", f.what(), key, e.what()));
  }
}

// A JSON number parsed from text is unsigned when non-negative; one built in this process may be a
// signed integer of the same value.
bool non_negative_integer(const nlohmann::json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

// MixKind masks, one per argument (bounded: a spec's arguments are a few hundred at most).
std::vector<uint32_t> mix_kinds(const Fields& f, const char* key) {
  std::vector<uint32_t> out;
  const auto& items = f.array(key);
  if (items.size() > kMaxOutputs) throw InputError(fmt::format("{}: field '{}' holds {} entries, at most {}", f.what(), key, items.size(), kMaxOutputs));
  for (const uint64_t v : f.unsigned_integers(key)) {
    if (v > 7) throw InputError(fmt::format("{}: field '{}': {} is not a value mix (bits 1, 2 and 4)", f.what(), key, v));
    out.push_back(static_cast<uint32_t>(v));
  }
  return out;
}

std::optional<double> optional_number(const Fields& f, const char* key) {
  if (!f.has(key)) return std::nullopt;
  return f.number(key);
}

}  // namespace

std::string_view op_name(Op op) {
  for (const auto& [o, name] : kOpNames) {
    if (o == op) return name;
  }
  return "?";
}

Op parse_op(std::string_view name) {
  for (const auto& [o, n] : kOpNames) {
    if (n == name) return o;
  }
  throw InputError(fmt::format("unknown worker operation '{}'", name));
}

std::string_view arena_owner_name(ArenaOwner owner) { return owner == ArenaOwner::candidate ? "candidate" : "reference"; }

// ---- Fields ----

std::vector<std::string> Fields::texts(const char* key) const {
  std::vector<std::string> out;
  for (const auto& item : array(key)) {
    if (!item.is_string()) wrong(key, "an array of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

Fields::Fields(const nlohmann::json& json, std::string what) : json_(json), what_(std::move(what)) {
  if (!json_.is_object()) throw InputError(what_ + ": not a JSON object");
}

void Fields::wrong(const char* key, const char* expected) const {
  if (!json_.contains(key)) throw InputError(fmt::format("{}: field '{}' is missing", what_, key));
  throw InputError(fmt::format("{}: field '{}' is not {} ({})", what_, key, expected, json_.at(key).dump().substr(0, 80)));
}

bool Fields::has(const char* key) const { return json_.contains(key); }

const nlohmann::json& Fields::at(const char* key) const {
  if (!json_.contains(key)) wrong(key, "present");
  return json_.at(key);
}

std::string Fields::text(const char* key) const {
  if (!json_.contains(key) || !json_.at(key).is_string()) wrong(key, "a string");
  return json_.at(key).get<std::string>();
}

bool Fields::flag(const char* key) const {
  if (!json_.contains(key) || !json_.at(key).is_boolean()) wrong(key, "a boolean");
  return json_.at(key).get<bool>();
}

double Fields::number(const char* key) const {
  if (!json_.contains(key) || !json_.at(key).is_number()) wrong(key, "a number");
  return json_.at(key).get<double>();
}

int64_t Fields::integer(const char* key) const {
  if (!json_.contains(key) || !json_.at(key).is_number_integer()) wrong(key, "an integer");
  const auto& v = json_.at(key);
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) wrong(key, "a 64-bit signed integer");
  return v.get<int64_t>();
}

uint64_t Fields::unsigned_integer(const char* key) const {
  if (!json_.contains(key) || !non_negative_integer(json_.at(key))) wrong(key, "a non-negative integer");
  return json_.at(key).get<uint64_t>();
}

int Fields::int32(const char* key) const {
  const int64_t v = integer(key);
  if (v < INT32_MIN || v > INT32_MAX) wrong(key, "a 32-bit integer");
  return static_cast<int>(v);
}

std::vector<int64_t> Fields::integers(const char* key) const {
  std::vector<int64_t> out;
  for (const auto& v : array(key)) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
      wrong(key, "an array of integers");
    }
    out.push_back(v.get<int64_t>());
  }
  return out;
}

std::vector<uint64_t> Fields::unsigned_integers(const char* key) const {
  std::vector<uint64_t> out;
  for (const auto& v : array(key)) {
    if (!non_negative_integer(v)) wrong(key, "an array of non-negative integers");
    out.push_back(v.get<uint64_t>());
  }
  return out;
}

const nlohmann::json& Fields::array(const char* key) const {
  if (!json_.contains(key) || !json_.at(key).is_array()) wrong(key, "an array");
  return json_.at(key);
}

const nlohmann::json& Fields::object(const char* key) const {
  if (!json_.contains(key) || !json_.at(key).is_object()) wrong(key, "an object");
  return json_.at(key);
}

// ---- load ----

static nlohmann::json extensions_json(const std::vector<BuiltExtension>& extensions) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& e : extensions) out.push_back(e.to_json());
  return out;
}

nlohmann::json LoadRequest::to_json() const {
  return {{"reference_program", reference_program}, {"library", library},
          {"scale", scale},                         {"device", device.device},
          {"gpu_memory_fraction", device.gpu_memory_fraction},
          {"cpu_threads", device.cpu_threads},      {"cache_bytes", cache_bytes},
          {"program_name", program_name},           {"replay_as_graph", replay_as_graph},
          {"program_kind", program_kind},           {"python_source", python_source},
          {"origin", origin},                       {"extensions", extensions_json(extensions)},
          {"kernelbench_seed", kernelbench_seed},   {"kernelbench_model", kernelbench_model},
          {"python_class", python_class},           {"precision", device.precision}, {"release_after_requests", device.release_after_requests},
          {"value_mix", value_mix}};
}

LoadRequest LoadRequest::from(const Fields& f) {
  LoadRequest r;
  r.reference_program = f.text("reference_program");
  r.library = f.text("library");
  r.scale = f.text("scale");
  r.device.device = f.text("device");
  r.device.gpu_memory_fraction = f.number("gpu_memory_fraction");
  r.device.cpu_threads = f.int32("cpu_threads");
  r.cache_bytes = f.integer("cache_bytes");
  r.program_name = f.text("program_name");
  r.replay_as_graph = f.flag("replay_as_graph");
  r.program_kind = f.text("program_kind");
  r.python_source = f.text("python_source");
  r.origin = f.text("origin");
  for (const auto& e : f.array("extensions")) r.extensions.push_back(BuiltExtension::from(Fields(e, f.what() + ": extensions")));
  r.kernelbench_seed = f.unsigned_integer("kernelbench_seed");
  r.kernelbench_model = f.text("kernelbench_model");
  r.python_class = f.text("python_class");
  r.device.precision = f.text("precision");
  r.device.release_after_requests = f.flag("release_after_requests");
  if (r.device.precision != "fp32" && r.device.precision != "tf32") {
    throw InputError(fmt::format("{}: field 'precision' must be fp32 or tf32 (got '{}')", f.what(), r.device.precision));
  }
  r.value_mix = mix_kinds(f, "value_mix");
  return r;
}

nlohmann::json ExtensionBuild::to_json() const {
  return {{"key", key},
          {"name", name},
          {"cpp_sources", cpp_sources},
          {"cuda_sources", cuda_sources},
          {"functions", functions},
          {"bindings", bindings},
          {"extra_cflags", extra_cflags},
          {"extra_cuda_cflags", extra_cuda_cflags},
          {"extra_ldflags", extra_ldflags}};
}

ExtensionBuild ExtensionBuild::from(const Fields& f) {
  return {f.text("key"),        f.text("name"),     f.text("cpp_sources"),           f.text("cuda_sources"),
          f.texts("functions"), f.flag("bindings"), f.texts("extra_cflags"), f.texts("extra_cuda_cflags"),
          f.texts("extra_ldflags")};
}

nlohmann::json BuiltExtension::to_json() const { return {{"key", key}, {"library", library}, {"error", error}}; }

BuiltExtension BuiltExtension::from(const Fields& f) { return {f.text("key"), f.text("library"), f.text("error")}; }

nlohmann::json LoadReply::to_json() const {
  nlohmann::json builds = nlohmann::json::array();
  for (const auto& b : needs_builds) builds.push_back(b.to_json());
  return {{"num_args", num_args},
          {"arguments", metas_json(arguments)},
          {"probe_baseline_us", probe_baseline_us},
          {"device_name", device_name},
          {"intra_op_threads", intra_op_threads},
          {"needs_builds", builds}};
}

LoadReply LoadReply::from(const Fields& f) {
  LoadReply r;
  r.num_args = f.int32("num_args");
  for (const auto& a : f.array("arguments")) r.arguments.push_back(tensor_meta_from_json(a));
  r.probe_baseline_us = f.number("probe_baseline_us");
  r.device_name = f.text("device_name");
  r.intra_op_threads = f.int32("intra_op_threads");
  const auto& builds = f.array("needs_builds");
  if (builds.size() > kMaxExtensionBuilds) {
    throw InputError(fmt::format("{}: {} extensions to build, more than the {} a load may ask for", f.what(), builds.size(),
                                 kMaxExtensionBuilds));
  }
  for (const auto& b : builds) r.needs_builds.push_back(ExtensionBuild::from(Fields(b, f.what() + ": needs_builds")));
  return r;
}

// ---- arenas ----

nlohmann::json ArenaRequest::to_json() const {
  return {{"layout", worker::to_json(layout)}, {"output_region_bytes", output_region_bytes}};
}

ArenaRequest ArenaRequest::from(const Fields& f) {
  return {arena_layout_from_json(f.object("layout")), f.unsigned_integer("output_region_bytes")};
}

nlohmann::json ArenaReply::to_json() const { return {{"ipc_handle", ipc_handle}}; }
ArenaReply ArenaReply::from(const Fields& f) { return {f.text("ipc_handle")}; }

nlohmann::json AdoptArenaRequest::to_json() const {
  return {{"which", std::string(arena_owner_name(which))}, {"ipc_handle", ipc_handle}};
}
AdoptArenaRequest AdoptArenaRequest::from(const Fields& f) { return {parse_owner(f), f.text("ipc_handle")}; }

nlohmann::json AdoptArenaReply::to_json() const { return {{"adopted", adopted}, {"message", message}}; }
AdoptArenaReply AdoptArenaReply::from(const Fields& f) { return {f.flag("adopted"), f.text("message")}; }

nlohmann::json DropArenaRequest::to_json() const { return {{"which", std::string(arena_owner_name(which))}}; }
DropArenaRequest DropArenaRequest::from(const Fields& f) { return {parse_owner(f)}; }

// ---- inputs and calls ----

nlohmann::json FillRequest::to_json() const {
  nlohmann::json items = nlohmann::json::array();
  for (const auto& s : slots) items.push_back({{"slot", s.slot}, {"seed", s.seed}, {"edges", s.edges}, {"spread", s.spread}});
  return {{"slots", items}, {"both", both}, {"staged", staged}};
}

FillRequest FillRequest::from(const Fields& f) {
  FillRequest r;
  const auto& items = f.array("slots");
  for (size_t i = 0; i < items.size(); ++i) {
    const Fields item = element(f, items[i], "slots", i);
    r.slots.push_back({item.int32("slot"), item.unsigned_integer("seed"), item.flag("edges"), item.flag("spread")});
  }
  r.both = f.flag("both");
  r.staged = f.flag("staged");
  return r;
}

nlohmann::json RunRequest::to_json() const {
  return {{"slot", slot ? nlohmann::json(*slot) : nlohmann::json()}, {"seed", seed}, {"spread_samples", spread_samples}};
}

RunRequest RunRequest::from(const Fields& f) {
  RunRequest r;
  if (!f.at("slot").is_null()) r.slot = f.int32("slot");
  r.seed = f.unsigned_integer("seed");
  r.spread_samples = f.flag("spread_samples");
  return r;
}

nlohmann::json RunReply::to_json() const { return {{"outputs", refs_json(outputs)}}; }
RunReply RunReply::from(const Fields& f) { return {parse_refs(f, "outputs")}; }

nlohmann::json BatchTimelineSummary::to_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (first_call_device_us) j["first_call_device_us"] = *first_call_device_us;
  if (first_call_host_us) j["first_call_host_us"] = *first_call_host_us;
  if (later_call_device_us) j["later_call_device_us"] = *later_call_device_us;
  if (later_call_host_us) j["later_call_host_us"] = *later_call_host_us;
  if (served_us) j["served_us"] = *served_us;
  if (describe_us) j["describe_us"] = *describe_us;
  if (arrived_at_us) j["arrived_at_us"] = *arrived_at_us;
  if (described_at_us) j["described_at_us"] = *described_at_us;
  return j;
}

BatchTimelineSummary BatchTimelineSummary::from(const Fields& f) {
  // Each reading is there only where the worker could take it (the GPU's events; a second call).
  BatchTimelineSummary s;
  s.first_call_device_us = optional_number(f, "first_call_device_us");
  s.first_call_host_us = optional_number(f, "first_call_host_us");
  s.later_call_device_us = optional_number(f, "later_call_device_us");
  s.later_call_host_us = optional_number(f, "later_call_host_us");
  s.served_us = optional_number(f, "served_us");
  s.describe_us = optional_number(f, "describe_us");
  s.arrived_at_us = optional_number(f, "arrived_at_us");
  s.described_at_us = optional_number(f, "described_at_us");
  return s;
}

nlohmann::json TimeRequest::to_json() const { return {{"slots", slots}, {"turns", turns}}; }
TimeRequest TimeRequest::from(const Fields& f) { return {f.integers("slots"), f.flag("turns")}; }

nlohmann::json TimeReply::to_json() const { return {{"batch", batch}, {"timeline", timeline.to_json()}}; }

TimeReply TimeReply::from(const Fields& f) {
  TimeReply r;
  r.batch = f.object("batch");
  const nlohmann::json& timeline = f.object("timeline");
  r.timeline = BatchTimelineSummary::from(Fields(timeline, f.what() + ", timeline"));
  return r;
}

nlohmann::json StartTimingRequest::to_json() const { return {{"slots", slots}}; }
StartTimingRequest StartTimingRequest::from(const Fields& f) { return {f.int32("slots")}; }

// ---- guards ----

nlohmann::json GuardRequest::to_json() const {
  return {{"seeds", seeds}, {"output_bytes", output_bytes}, {"settle_seconds", settle_seconds}, {"part", part}};
}

GuardRequest GuardRequest::from(const Fields& f) {
  GuardRequest r{f.unsigned_integers("seeds"), f.integers("output_bytes"), f.number("settle_seconds"), f.int32("part")};
  if (r.seeds.size() != 2) throw InputError(f.what() + ": field 'seeds' must hold two seeds");
  if (r.part < 1 || r.part > 3) throw InputError(f.what() + ": field 'part' must be 1, 2 or 3");
  return r;
}

nlohmann::json GuardReply::to_json() const {
  nlohmann::json c = nlohmann::json::array();
  for (const auto& k : checks) c.push_back({{"name", k.name}, {"passed", k.passed}, {"kind", k.kind}, {"detail", k.detail}});
  nlohmann::json g = nlohmann::json::array();
  for (const auto& k : groups) g.push_back({{"name", k.name}, {"kind", k.kind}, {"seed_index", k.seed_index}, {"count", k.count}});
  return {{"checks", c}, {"groups", g}, {"outputs", refs_json(outputs)}};
}

GuardReply GuardReply::from(const Fields& f) {
  GuardReply r;
  const auto& checks = f.array("checks");
  for (size_t i = 0; i < checks.size(); ++i) {
    const Fields c = element(f, checks[i], "checks", i);
    r.checks.push_back({c.text("name"), c.flag("passed"), c.text("kind"), c.text("detail")});
  }
  const auto& groups = f.array("groups");
  size_t total = 0;
  for (size_t i = 0; i < groups.size(); ++i) {
    const Fields g = element(f, groups[i], "groups", i);
    GuardGroup group{g.text("name"), g.text("kind"), g.int32("seed_index"), g.integer("count")};
    if (group.seed_index < 0 || group.seed_index > 1) throw InputError(g.what() + ": seed_index must be 0 or 1");
    if (group.count < 0) throw InputError(g.what() + ": count must not be negative");
    total += static_cast<size_t>(group.count);
    r.groups.push_back(std::move(group));
  }
  r.outputs = parse_refs(f, "outputs");
  if (total > r.outputs.size()) throw InputError(f.what() + ": guard reply has fewer outputs than its groups");
  return r;
}

// ---- the judge's reference runs ----

nlohmann::json ReferenceRequest::to_json() const {
  return {{"key", key}, {"seed", seed}, {"edges", edges}, {"spread", spread}, {"float64", float64}};
}
ReferenceRequest ReferenceRequest::from(const Fields& f) {
  return {f.text("key"), f.unsigned_integer("seed"), f.flag("edges"), f.flag("spread"), f.flag("float64")};
}

nlohmann::json ReferenceReply::to_json() const {
  nlohmann::json metas = nlohmann::json::array();
  for (const auto& o : outputs) {
    nlohmann::json m = worker::to_json(o.meta);
    m["device"] = o.device;
    metas.push_back(m);
  }
  return {{"outputs", metas}, {"spread_inputs", spread_inputs}, {"float64_missing", float64_missing}};
}

ReferenceReply ReferenceReply::from(const Fields& f) {
  ReferenceReply r;
  const auto& outputs = f.array("outputs");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Fields o = element(f, outputs[i], "outputs", i);
    r.outputs.push_back({tensor_meta_from_json(outputs[i]), o.text("device")});
  }
  r.spread_inputs = f.integer("spread_inputs");
  r.float64_missing = f.text("float64_missing");
  return r;
}

nlohmann::json ReferenceSlotRequest::to_json() const { return {{"slot", slot}, {"seed", seed}, {"float64", float64}}; }
ReferenceSlotRequest ReferenceSlotRequest::from(const Fields& f) {
  return {f.int32("slot"), f.unsigned_integer("seed"), f.flag("float64")};
}

nlohmann::json BatchCopyRequest::to_json() const { return {{"key", key}}; }
BatchCopyRequest BatchCopyRequest::from(const Fields& f) { return {f.text("key")}; }
nlohmann::json BatchCopyReply::to_json() const { return {{"would_pass", would_pass}}; }
BatchCopyReply BatchCopyReply::from(const Fields& f) { return {f.flag("would_pass")}; }

nlohmann::json CallTimeRequest::to_json() const { return {{"seed", seed}, {"repeats", repeats}}; }
CallTimeRequest CallTimeRequest::from(const Fields& f) { return {f.unsigned_integer("seed"), f.int32("repeats")}; }
nlohmann::json CallTimeReply::to_json() const { return {{"call_us", call_us}, {"peak_bytes", peak_bytes}, {"card_bytes", card_bytes}}; }
CallTimeReply CallTimeReply::from(const Fields& f) { return {f.number("call_us"), f.integer("peak_bytes"), f.integer("card_bytes")}; }
nlohmann::json MemoryShareRequest::to_json() const {
  return {{"gpu_memory_fraction", gpu_memory_fraction}, {"cache_bytes", cache_bytes}, {"release_after_requests", release_after_requests}};
}
MemoryShareRequest MemoryShareRequest::from(const Fields& f) {
  return {f.number("gpu_memory_fraction"), f.integer("cache_bytes"), f.flag("release_after_requests")};
}

// ---- the judge's checks ----

nlohmann::json CompareRequest::to_json() const { return {{"key", key}, {"outputs", refs_json(outputs)}}; }
CompareRequest CompareRequest::from(const Fields& f) { return {f.text("key"), parse_refs(f, "outputs")}; }
nlohmann::json CompareReply::to_json() const {
  return {{"match", match}, {"message", message}, {"max_abs_error", max_abs_error}, {"precision_ratio", precision_ratio}};
}
CompareReply CompareReply::from(const Fields& f) {
  return {f.flag("match"), f.text("message"), f.number("max_abs_error"), f.number("precision_ratio")};
}

nlohmann::json ValuesRequest::to_json() const { return {{"seed", seed}, {"eligible", eligible}}; }
ValuesRequest ValuesRequest::from(const Fields& f) { return {f.unsigned_integer("seed"), mix_kinds(f, "eligible")}; }
nlohmann::json ValuesReply::to_json() const { return {{"kinds", kinds}, {"runs", runs}, {"dropped", dropped}}; }
ValuesReply ValuesReply::from(const Fields& f) { return {mix_kinds(f, "kinds"), f.int32("runs"), f.text("dropped")}; }

nlohmann::json CheckInputsRequest::to_json() const {
  return {{"slot", slot}, {"seed", seed}, {"edges", edges}, {"spread", spread}, {"keep", keep}};
}
CheckInputsRequest CheckInputsRequest::from(const Fields& f) {
  return {f.int32("slot"), f.unsigned_integer("seed"), f.flag("edges"), f.flag("spread"), f.flag("keep")};
}
nlohmann::json CheckInputsReply::to_json() const { return {{"changed", changed}}; }
CheckInputsReply CheckInputsReply::from(const Fields& f) { return {f.integers("changed")}; }

nlohmann::json ProbeRequest::to_json() const { return {{"slack_us", slack_us}}; }
ProbeRequest ProbeRequest::from(const Fields& f) { return {f.number("slack_us")}; }
nlohmann::json ProbeReply::to_json() const {
  return {{"idle", idle},
          {"probe_us", probe_us},
          {"first_probe_us", first_probe_us},
          {"second_probe_us", second_probe_us},
          {"retries", retries},
          {"baseline_us", baseline_us}};
}
ProbeReply ProbeReply::from(const Fields& f) {
  return {f.flag("idle"),         f.number("probe_us"), f.number("first_probe_us"), f.number("second_probe_us"),
          f.int32("retries"),     f.number("baseline_us")};
}

// ---- the wire ----

Op request_op(const nlohmann::json& request) {
  if (!request.is_object() || !request.contains("op") || !request["op"].is_string()) {
    throw InputError("a worker request needs an 'op' (a string)");
  }
  return parse_op(request["op"].get<std::string>());
}

nlohmann::json encode_error(const ErrorReply& error) {
  return {{"ok", false},
          {"error", error.error},
          {"sticky", error.sticky},
          {"out_of_memory", error.out_of_memory},
          {"device_short", error.device_short},
          {"status", error.status}};
}

std::optional<ErrorReply> reply_error(const nlohmann::json& reply, Op op) {
  const Fields f(reply, "reply to '" + std::string(op_name(op)) + "'");
  if (f.flag("ok")) return std::nullopt;
  ErrorReply error{f.text("error"), f.flag("sticky"), f.flag("out_of_memory"), f.has("device_short") && f.flag("device_short")};
  if (f.has("status")) error.status = f.text("status");
  if (!error.status.empty() && error.status != "format_error" && error.status != "compile_error") {
    throw InputError(fmt::format("reply to '{}': status '{}' is none a worker may give", op_name(op), error.status));
  }
  return error;
}

}  // namespace crl::worker
