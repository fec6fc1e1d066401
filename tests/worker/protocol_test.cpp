// The worker protocol: every request and reply survives its encoding, and a message missing a field
// or holding one of the wrong type is refused naming the operation and the field (a field read
// with a default would be a guard that turns itself off when the other side forgets it).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "worker/protocol.h"

namespace crl::worker {
namespace {

template <typename Request>
Request round_trip(const Request& request) {
  const nlohmann::json wire = encode_request(request);
  EXPECT_EQ(request_op(wire), Request::op);
  return decode_request<Request>(nlohmann::json::parse(wire.dump()));
}

template <typename Reply>
Reply reply_round_trip(const Reply& reply, Op op) {
  const nlohmann::json wire = nlohmann::json::parse(encode_reply(reply).dump());
  EXPECT_FALSE(reply_error(wire, op).has_value());
  return decode_reply<Reply>(wire, op);
}

// The message of the InputError that decoding `json` as Request throws.
template <typename Request>
std::string refusal(const nlohmann::json& json) {
  try {
    (void)decode_request<Request>(json);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const TensorMeta kMeta{{4, 16}, at::kFloat};

TEST(Protocol, EveryOperationHasOneNameBothWays) {
  for (int i = 0; i <= static_cast<int>(Op::quit); ++i) {
    const Op op = static_cast<Op>(i);
    EXPECT_EQ(parse_op(op_name(op)), op) << op_name(op);
  }
  EXPECT_THROW(parse_op("launch_missiles"), InputError);
  EXPECT_THROW(request_op(nlohmann::json{{"seed", 1}}), InputError);
}

TEST(Protocol, RequestsRoundTrip) {
  LoadRequest load;
  load.reference_program = "/suite/level1/019_relu/reference.crl";
  load.library = "/cache/objects/ab/lib.so";
  load.scale = "small";
  load.device = {"cuda", 0.6, 2, "tf32", true};
  load.value_mix = {3, 0, 4};
  load.cache_bytes = int64_t{16} << 30;
  load.program_name = "reference";
  load.replay_as_graph = true;
  load.kernelbench_seed = uint64_t{1} << 59;
  load.kernelbench_model = "class Model: ...";
  load.extensions = {{"key1", "/lib.so", ""}, {"key2", "", "host stage failed:\nerror: x"}};
  const LoadRequest l = round_trip(load);
  EXPECT_EQ(l.kernelbench_seed, uint64_t{1} << 59);
  EXPECT_EQ(l.kernelbench_model, load.kernelbench_model);
  ASSERT_EQ(l.extensions.size(), 2u);
  EXPECT_EQ(l.extensions[1].error, load.extensions[1].error);
  EXPECT_EQ(l.extensions[0].library, "/lib.so");
  EXPECT_EQ(l.reference_program, load.reference_program);
  EXPECT_EQ(l.library, load.library);
  EXPECT_EQ(l.device.device, "cuda");
  EXPECT_EQ(l.device.gpu_memory_fraction, 0.6);
  EXPECT_EQ(l.device.cpu_threads, 2);
  EXPECT_EQ(l.cache_bytes, int64_t{16} << 30);
  EXPECT_EQ(l.program_name, "reference");
  EXPECT_TRUE(l.replay_as_graph);
  EXPECT_EQ(l.device.precision, "tf32");
  EXPECT_TRUE(l.device.release_after_requests);
  const MemoryShareRequest share = round_trip(MemoryShareRequest{0.31, int64_t{3} << 30, true});
  EXPECT_EQ(share.gpu_memory_fraction, 0.31);
  EXPECT_EQ(share.cache_bytes, int64_t{3} << 30);
  EXPECT_TRUE(share.release_after_requests);
  const CallTimeReply timed = reply_round_trip(CallTimeReply{12.5, int64_t{16} << 30, int64_t{80} << 30}, Op::call_time);
  EXPECT_EQ(timed.peak_bytes, int64_t{16} << 30);
  EXPECT_EQ(timed.card_bytes, int64_t{80} << 30);
  EXPECT_EQ(l.value_mix, (std::vector<uint32_t>{3, 0, 4}));

  const FillRequest f = round_trip(FillRequest{{{0, 7, false, false}, {3, uint64_t{1} << 59, true, true}}, true});
  ASSERT_EQ(f.slots.size(), 2u);
  EXPECT_EQ(f.slots[1].slot, 3);
  EXPECT_EQ(f.slots[1].seed, uint64_t{1} << 59);
  EXPECT_TRUE(f.slots[1].edges);
  EXPECT_TRUE(f.slots[1].spread);
  EXPECT_TRUE(f.both);
  EXPECT_FALSE(f.staged);
  EXPECT_TRUE(round_trip(FillRequest{{{1, 7, false, false}}, false, true}).staged);

  EXPECT_EQ(round_trip(RunRequest{5, 0, false}).slot, 5);
  const RunRequest seeded = round_trip(RunRequest{std::nullopt, 99, true});
  EXPECT_FALSE(seeded.slot.has_value());
  EXPECT_EQ(seeded.seed, 99u);
  EXPECT_TRUE(seeded.spread_samples);

  EXPECT_EQ(round_trip(TimeRequest{{0, 1, 2}}).slots, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(round_trip(TimeRequest{{}}).slots.empty());
  EXPECT_FALSE(round_trip(TimeRequest{{0}}).turns);
  EXPECT_TRUE(round_trip(TimeRequest{{0, 1}, true}).turns);
  const GuardRequest g = round_trip(GuardRequest{{11, 12}, {4096}, 0.05, 2});
  EXPECT_EQ(g.part, 2);
  EXPECT_EQ(g.seeds, (std::vector<uint64_t>{11, 12}));
  EXPECT_EQ(g.output_bytes, (std::vector<int64_t>{4096}));
  EXPECT_EQ(g.settle_seconds, 0.05);
  const CheckInputsRequest c = round_trip(CheckInputsRequest{2, 8, true, false, true});
  EXPECT_EQ(c.slot, 2);
  EXPECT_TRUE(c.edges);
  EXPECT_TRUE(c.keep);
  EXPECT_EQ(round_trip(AdoptArenaRequest{ArenaOwner::reference, "ab"}).which, ArenaOwner::reference);
  EXPECT_EQ(round_trip(DropArenaRequest{ArenaOwner::candidate}).which, ArenaOwner::candidate);
  const ArenaRequest a = round_trip(ArenaRequest{arena_layout({kMeta}, 8), 4096});
  EXPECT_EQ(a.layout.slots, 8);
  EXPECT_EQ(a.layout.arguments, std::vector<TensorMeta>{kMeta});
  EXPECT_EQ(a.output_region_bytes, 4096u);
  TensorRef ref{kMeta, "cpu", 4096, "", 0};
  const CompareRequest cmp = round_trip(CompareRequest{"batch:3", {ref}});
  ASSERT_EQ(cmp.outputs.size(), 1u);
  EXPECT_EQ(cmp.outputs[0].address, 4096u);
  EXPECT_EQ(round_trip(ProbeRequest{50}).slack_us, 50);
  EXPECT_EQ(round_trip(CallTimeRequest{3, 5}).repeats, 5);
  EXPECT_TRUE(round_trip(ReferenceRequest{"trial:0", 4, false, false, true}).float64);
  EXPECT_TRUE(round_trip(ReferenceSlotRequest{2, 4, true}).float64);
  const ValuesRequest v = round_trip(ValuesRequest{77, {3, 0, 4}});
  EXPECT_EQ(v.seed, 77u);
  EXPECT_EQ(v.eligible, (std::vector<uint32_t>{3, 0, 4}));
}

TEST(Protocol, RepliesRoundTrip) {
  GuardReply guard;
  guard.checks = {{"threads", false, "deferred_work", "2 threads after"}};
  guard.groups = {{"same addresses, new values", "output_cache", 1, 1}};
  guard.outputs = {TensorRef{kMeta, "cuda", 0, std::string(128, 'a'), 512}};
  const GuardReply g = reply_round_trip(guard, Op::guard);
  ASSERT_EQ(g.checks.size(), 1u);
  EXPECT_FALSE(g.checks[0].passed);
  EXPECT_EQ(g.checks[0].kind, "deferred_work");
  EXPECT_EQ(g.groups[0].seed_index, 1);
  EXPECT_EQ(g.outputs[0].offset, 512u);

  TimeReply time;
  time.batch = {{"metas", nlohmann::json::array()}, {"handles", nlohmann::json::array()}, {"calls", nlohmann::json::array()}};
  time.timeline.first_call_host_us = 12.5;
  time.timeline.arrived_at_us = 8.1e9;  // microseconds of the host's monotonic clock: beyond 2^32
  time.timeline.described_at_us = 8.1e9 + 3127.5;
  const TimeReply t = reply_round_trip(time, Op::time);
  EXPECT_EQ(t.timeline.first_call_host_us, 12.5);
  EXPECT_EQ(t.timeline.arrived_at_us, 8.1e9);
  EXPECT_EQ(t.timeline.described_at_us, 8.1e9 + 3127.5);
  EXPECT_FALSE(t.timeline.first_call_device_us.has_value());  // absent, not 0

  const ProbeReply p = reply_round_trip(ProbeReply{false, 320, 450, 320, 1, 101}, Op::probe);
  EXPECT_FALSE(p.idle);
  EXPECT_EQ(p.retries, 1);
  EXPECT_EQ(p.baseline_us, 101);
  const ReferenceReply r = reply_round_trip(ReferenceReply{{{kMeta, "cuda"}}, 3}, Op::reference);
  EXPECT_EQ(r.outputs, (std::vector<OutputMeta>{{kMeta, "cuda"}}));
  EXPECT_EQ(r.spread_inputs, 3);
  const CompareReply c = reply_round_trip(CompareReply{false, "output 0 differs", 0.5, 812.5}, Op::compare);
  EXPECT_FALSE(c.match);
  EXPECT_EQ(c.message, "output 0 differs");
  EXPECT_EQ(c.precision_ratio, 812.5);
  EXPECT_EQ(reply_round_trip(ReferenceReply{{}, 0, "the reference does not run in float64"}, Op::reference).float64_missing,
            "the reference does not run in float64");
  const ValuesReply v = reply_round_trip(ValuesReply{{1, 2}, 5, "x: signs"}, Op::values);
  EXPECT_EQ(v.kinds, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(v.runs, 5);
  EXPECT_EQ(v.dropped, "x: signs");
}

// The precision contract's fields are required: a load without "precision" or a compare reply
// without "precision_ratio" is refused, never read as fp32 or as "no float64 reference".
TEST(Protocol, ThePrecisionFieldsAreRequiredAndChecked) {
  LoadRequest load;
  load.device = {"cpu", 0, 1, "fp32"};
  nlohmann::json wire = encode_request(load);
  wire.erase("precision");
  EXPECT_NE(refusal<LoadRequest>(wire).find("'precision'"), std::string::npos);
  wire = encode_request(load);
  wire["precision"] = "fp16";
  EXPECT_NE(refusal<LoadRequest>(wire).find("fp32 or tf32"), std::string::npos);
  wire = encode_request(load);
  wire["value_mix"] = nlohmann::json::array({8});
  EXPECT_NE(refusal<LoadRequest>(wire).find("not a value mix"), std::string::npos);
  nlohmann::json compare = encode_reply(CompareReply{true, "", 0, 0.5});
  compare.erase("precision_ratio");
  EXPECT_THROW((void)decode_reply<CompareReply>(compare, Op::compare), InputError);
}

TEST(Protocol, AMissingFieldIsRefusedNamingItNeverDefaulted) {
  nlohmann::json fill = encode_request(FillRequest{{{0, 7, false, false}}, true});
  fill.erase("both");
  const std::string why = refusal<FillRequest>(fill);
  EXPECT_NE(why.find("'fill'"), std::string::npos) << why;
  EXPECT_NE(why.find("'both'"), std::string::npos) << why;
  EXPECT_NE(why.find("missing"), std::string::npos) << why;
  // A nested field too: the slot's seed.
  fill = encode_request(FillRequest{{{0, 7, false, false}}, true});
  fill["slots"][0].erase("seed");
  EXPECT_NE(refusal<FillRequest>(fill).find("slots[0]"), std::string::npos);
  // A reply: the judge's idle probe without "idle" must not read as idle.
  nlohmann::json probe = encode_reply(ProbeReply{});
  probe.erase("idle");
  EXPECT_THROW((void)decode_reply<ProbeReply>(probe, Op::probe), InputError);
}

TEST(Protocol, AFieldOfTheWrongTypeIsRefused) {
  nlohmann::json check = encode_request(CheckInputsRequest{2, 8, false, false, true});
  check["keep"] = 1;  // a number where a boolean belongs
  EXPECT_NE(refusal<CheckInputsRequest>(check).find("'keep' is not a boolean"), std::string::npos);
  check = encode_request(CheckInputsRequest{2, 8, false, false, true});
  check["seed"] = -8;  // seeds are unsigned
  EXPECT_NE(refusal<CheckInputsRequest>(check).find("'seed'"), std::string::npos);
  check = encode_request(CheckInputsRequest{2, 8, false, false, true});
  check["slot"] = 1e12;  // not an integer
  EXPECT_NE(refusal<CheckInputsRequest>(check).find("'slot'"), std::string::npos);
  nlohmann::json guard = encode_request(GuardRequest{{11, 12}, {4096}, 0.05});
  guard["seeds"] = nlohmann::json::array({11});
  EXPECT_NE(refusal<GuardRequest>(guard).find("two seeds"), std::string::npos);
  guard = encode_request(GuardRequest{{11, 12}, {4096}, 0.05, 4});
  EXPECT_NE(refusal<GuardRequest>(guard).find("'part'"), std::string::npos);
  EXPECT_THROW((void)decode_request<TimeRequest>(nlohmann::json::array()), InputError);
}

TEST(Protocol, AGuardReplyWithFewerOutputsThanItsGroupsIsRefused) {
  GuardReply guard;
  guard.groups = {{"first call", "stale_memory", 0, 2}};
  guard.outputs = {TensorRef{kMeta, "cpu", 64, "", 0}};
  EXPECT_THROW((void)decode_reply<GuardReply>(encode_reply(guard), Op::guard), InputError);
  guard.groups[0].seed_index = 2;
  guard.groups[0].count = 1;
  EXPECT_THROW((void)decode_reply<GuardReply>(encode_reply(guard), Op::guard), InputError);
}

TEST(Protocol, AnErrorReplySaysWhetherItWasStickyAndOutOfMemory) {
  const nlohmann::json wire = encode_error({"CUDA out of memory", false, true});
  const auto error = reply_error(wire, Op::compare);
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->error, "CUDA out of memory");
  EXPECT_FALSE(error->sticky);
  EXPECT_TRUE(error->out_of_memory);
  // A reply without "ok" is malformed, not a success.
  EXPECT_THROW(reply_error(nlohmann::json{{"idle", true}}, Op::probe), InputError);
}

}  // namespace
}  // namespace crl::worker
