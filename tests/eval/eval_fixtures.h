// Shared by the evaluator tests: the fixture suite and candidates under tests/data/eval, one
// Compiler over the tests' shared cache, quick options (small scale, short time budget), and the
// verdict checks (explain, expect_hack).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "compile/compiler.h"
#include "eval/evaluator.h"
#include "program/program_text.h"
#include "shared_test_cache.h"
#include "suite/suite.h"

namespace crl::eval::testing {

inline std::string fixture_dir() { return std::string(CRL_TEST_DATA_DIR) + "/eval"; }

inline const Suite& fixture_suite() {
  static const Suite suite = Suite::load(fixture_dir() + "/suite");
  return suite;
}

inline ProgramText relu_candidate(const std::string& name) {
  return load_program_file(fixture_dir() + "/relu/" + name + ".crl");
}

// One compiler per test binary, over the tests' shared cache in the build tree (reruns are fast).
inline Compiler& fixture_compiler() {
  static Compiler compiler([] {
    CompilerOptions o;
    o.cache_dir = crl::testing::shared_test_cache_dir();
    return o;
  }());
  return compiler;
}

// A verdict as JSON, for failure messages.
inline std::string explain(const Verdict& v) { return to_json(v).dump(2); }

// The verdict is hack:<kind> with no reward; with mismatch_allowed a mismatch passes too (where the
// ordinary trials may catch the program before its guard does: the guard's own test is direct).
inline void expect_hack(const Verdict& v, const std::string& kind, bool mismatch_allowed = false) {
  if (mismatch_allowed && v.status == VerdictStatus::kMismatch) return;
  EXPECT_EQ(v.status_text(), "hack:" + kind) << explain(v);
  EXPECT_EQ(v.reward, 0) << explain(v);
}

inline EvalOptions quick_options(Backend backend) {
  EvalOptions o;
  o.backend = backend;
  o.scale = backend == Backend::cpu ? "small" : "full";
  o.trials = 3;
  o.time_budget_seconds = backend == Backend::cpu ? 1.5 : 2;
  o.min_timed_pairs = 20;
  o.call_timeout_seconds = 10;  // the hang fixture costs this much
  o.idle_wait_seconds = 10;     // and the GPU attack that leaves work running while frozen
  o.cpu_threads = 1;
  o.renew_reference_worker = false;  // a worker start per evaluation; the self-judgement test turns it on
  // The CPU tests run on small shared machines, where the reference's own calls spread by up to
  // 170% (IQR over median) while others build: at the default +-10% a legitimate twin judged for
  // something else than its speed came out internal_error (machine too noisy), and at +-50% one
  // still did under a load of 7 on two cores (+-64.6% after 71 pairs). The noise limit has its own
  // tests (PipelineTest.*Noisy*, StopRule.*); these allow +-100%. The GPU keeps the default.
  if (backend == Backend::cpu) o.max_relative_ci = 1.0;
  o.worker_executable = CRL_WORKER_EXE;
  // For finding out, on a machine whose GPU driver the sandbox breaks, whether the rest works.
  o.sandbox = std::getenv("CRL_TEST_NO_SANDBOX") == nullptr;
  return o;
}

}  // namespace crl::eval::testing
