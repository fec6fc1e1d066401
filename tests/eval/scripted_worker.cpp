// A stand-in for crl-worker that speaks the typed protocol (lib/worker/protocol.h) without LibTorch
// programs: its replies follow a script, so the evaluator's stages can be driven through every way
// a judge or a program worker can answer, in a second, and what the evaluator asked can be read.
//
//   scripted_worker --script FILE --channel 3,4 --role judge|candidate [...]
// The script (JSON) says what differs from an honest run; absent keys mean honest:
//   "outputs": n            outputs a program worker returns (the reference returns 1)
//   "compare": "mismatch"   the judge finds every candidate output wrong; "batch_mismatch": only
//                           timed slots (batch:<j>) wrong; "strict_mismatch": only the stricter
//                           trials' (key strict); "out_of_memory": the judge fails comparing
//   "batch_mismatch_after": n  timed slots wrong after the first n compared (a program wrong in a
//                           few calls of a batch, which the one slot checked per pair may miss)
//   "time_us": {"reference": T, "candidate": [T1, T2, ...]}
//                           each call of a timed batch sleeps T us in the reference's timing worker,
//                           Ti in the i-th candidate worker loaded (the timing's, then each
//                           re-measure's); a T of [lo, hi] sleeps uniformly at random between (noise),
//                           {"cycle": [a, b, ...]} a in its first batch, b in its second, ...
//   "changed": true         the judge finds the checked inputs changed
//   "guard_fail": KIND      the guard probe's first check fails with that kind
//   "exit_on": OP           the program worker exits (code 3) on that operation, no reply
//   "drop_field": [OP, F]   the program worker's reply to OP lacks field F
// Every request's op (and a fill's seeds, a reference run's float64 flag, a load's value mix) is
// appended to FILE.log, one JSON line each.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "program/value_mix.h"
#include "worker/protocol.h"
#include "worker/worker_channel.h"

namespace {

using namespace crl::worker;

const TensorMeta kOutput{{16}, at::kFloat};

struct Script {
  nlohmann::json rules;
  std::string log_path;
  bool is(const char* key, const char* value) const { return rules.contains(key) && rules[key] == value; }
};

// What this program worker sleeps per timed call (its script's time_us entry, set at load).
nlohmann::json g_call_us = 0;
int g_batch_compares = 0;  // the judge's compares of timed slots so far

// The time_us entry of a program worker loading `program_name`: the reference's, or the i-th
// candidate worker's (counted in FILE.loads, one line per candidate load; candidates load one at
// a time).
nlohmann::json call_time_of(const Script& s, const std::string& program_name) {
  if (!s.rules.contains("time_us")) return 0;
  const nlohmann::json& t = s.rules["time_us"];
  if (program_name != "candidate") return t.value("reference", nlohmann::json(0));
  const std::string loads = s.log_path.substr(0, s.log_path.size() - 4) + ".loads";
  size_t index = 0;
  {
    std::ifstream in(loads);
    for (std::string line; std::getline(in, line);) ++index;
  }
  std::ofstream(loads, std::ios::app) << "load\n";
  const nlohmann::json& list = t.value("candidate", nlohmann::json::array());
  return index < list.size() ? list[index] : nlohmann::json(0);
}

void sleep_calls(size_t calls) {
  static std::mt19937_64 rng(static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ULL);
  static size_t batches = 0;  // non-empty batches so far (a cycle's position)
  const size_t batch = calls > 0 ? batches++ : 0;
  for (size_t c = 0; c < calls; ++c) {
    double us = 0;
    if (g_call_us.is_object()) {
      const nlohmann::json& cycle = g_call_us["cycle"];
      us = cycle[batch % cycle.size()].get<double>();
    } else if (g_call_us.is_array()) {
      us = std::uniform_real_distribution<double>(g_call_us[0].get<double>(), g_call_us[1].get<double>())(rng);
    } else {
      us = g_call_us.get<double>();
    }
    if (us > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::micro>(us));
  }
}

// What the program "computes": the candidate's outputs live here, read by the evaluator.
float g_outputs[64][16] = {};

TensorRef output_ref(int index) {
  return TensorRef{kOutput, "cpu", reinterpret_cast<uint64_t>(&g_outputs[index % 64][0]), "", 0};
}

nlohmann::json judge_reply(const Script& s, Op op, const nlohmann::json& request) {
  switch (op) {
    case Op::load: return encode_reply(LoadReply{1, {kOutput}, 0, "", 0});
    case Op::reference: return encode_reply(ReferenceReply{{{kOutput, "cpu"}}, 0});
    case Op::batch_copy: return encode_reply(BatchCopyReply{false});
    case Op::call_time: return encode_reply(CallTimeReply{10});
    case Op::compare: {
      const auto r = decode_request<CompareRequest>(request);
      const bool batch = r.key.rfind("batch:", 0) == 0;
      const bool late =
          batch && s.rules.contains("batch_mismatch_after") && g_batch_compares++ >= s.rules["batch_mismatch_after"].get<int>();
      if (s.is("compare", "out_of_memory")) return encode_error({"CUDA out of memory (scripted)", false, true});
      if (s.is("compare", "mismatch") || (batch && s.is("compare", "batch_mismatch")) || late ||
          (r.key == "strict" && s.is("compare", "strict_mismatch"))) {
        return encode_reply(CompareReply{false, "output 0: scripted mismatch", 1.0});
      }
      return encode_reply(CompareReply{true, "", 0});
    }
    case Op::check_inputs: {
      std::vector<int64_t> changed;
      if (s.rules.value("changed", false)) changed.push_back(0);
      return encode_reply(CheckInputsReply{changed});
    }
    case Op::probe: return encode_reply(ProbeReply{});
    case Op::values: return encode_reply(ValuesReply{{crl::kMixMagnitudes}, 1, ""});
    case Op::arena: return encode_reply(ArenaReply{""});
    default: return encode_reply(NoReply{});
  }
}

nlohmann::json program_reply(const Script& s, Op op, const nlohmann::json& request) {
  const int outputs = s.rules.value("outputs", 1);
  switch (op) {
    case Op::load:
      g_call_us = call_time_of(s, decode_request<LoadRequest>(request).program_name);
      return encode_reply(LoadReply{1, {}, 0, "", 1});
    case Op::arena: return encode_reply(ArenaReply{""});
    case Op::run: {
      RunReply reply;
      for (int i = 0; i < outputs; ++i) reply.outputs.push_back(output_ref(i));
      return encode_reply(reply);
    }
    case Op::guard: {
      // As the real probes answer: checks and the first call's group in part 1, one group in each
      // of parts 2 and 3.
      const auto r = decode_request<GuardRequest>(request);
      GuardReply reply;
      if (r.part == 1) {
        const bool fail = s.rules.contains("guard_fail");
        reply.checks.push_back({"aliasing", !fail, fail ? s.rules["guard_fail"].get<std::string>() : "aliasing", "scripted"});
      }
      const char* group = r.part == 1 ? "first call, free memory poisoned" : r.part == 2 ? "same values, new addresses" : "free memory poisoned";
      reply.groups.push_back({group, r.part == 2 ? "output_cache" : "stale_memory", 0, outputs});
      for (int i = 0; i < outputs; ++i) reply.outputs.push_back(output_ref(i));
      return encode_reply(reply);
    }
    case Op::time: {
      const auto r = decode_request<TimeRequest>(request);
      sleep_calls(r.slots.size());
      nlohmann::json calls = nlohmann::json::array();
      for (size_t c = 0; c < r.slots.size(); ++c) {
        nlohmann::json places = nlohmann::json::array();
        for (int i = 0; i < outputs; ++i) places.push_back(output_ref(static_cast<int>(c)).address);
        calls.push_back(places);
      }
      nlohmann::json metas = nlohmann::json::array();
      for (int i = 0; i < outputs; ++i) {
        nlohmann::json m = to_json(kOutput);
        m["device"] = "cpu";
        metas.push_back(m);
      }
      return encode_reply(TimeReply{{{"metas", metas}, {"handles", nlohmann::json::array()}, {"calls", calls}}, {}});
    }
    default: return encode_reply(NoReply{});
  }
}

}  // namespace

int main(int argc, char** argv) {
  Script script;
  bool judge = false;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--script") == 0) {
      std::ifstream in(argv[i + 1]);
      script.rules = nlohmann::json::parse(in);
      script.log_path = std::string(argv[i + 1]) + ".log";
    }
    if (std::strcmp(argv[i], "--role") == 0) judge = std::strcmp(argv[i + 1], "judge") == 0;
  }
  for (;;) {
    nlohmann::json request;
    try {
      request = read_message(3, std::nullopt, "evaluator");
    } catch (const ChannelClosed&) {
      return 0;
    }
    const Op op = request_op(request);
    {
      std::ofstream log(script.log_path, std::ios::app);
      nlohmann::json line = {{"role", judge ? "judge" : "program"}, {"op", std::string(op_name(op))}};
      if (op == Op::fill) line["seeds"] = request["slots"];
      if (op == Op::reference || op == Op::reference_slot) line["float64"] = request["float64"];
      if (op == Op::load) line["value_mix"] = request["value_mix"];
      log << line.dump() << "\n";
    }
    if (op == Op::quit) return 0;
    if (!judge && script.rules.contains("exit_on") && script.rules["exit_on"] == std::string(op_name(op))) std::_Exit(3);
    nlohmann::json reply = judge ? judge_reply(script, op, request) : program_reply(script, op, request);
    if (!judge && script.rules.contains("drop_field") && script.rules["drop_field"][0] == std::string(op_name(op))) {
      reply.erase(script.rules["drop_field"][1].get<std::string>());
    }
    write_message(4, reply);
  }
}
