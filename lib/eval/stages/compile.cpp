// The compile stage (compile.h).
#include "eval/stages/compile.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "eval/guard_symbols.h"
#include "eval/static_scan.h"

namespace crl::eval {
namespace {

// The symbol guard decides; the static scan only reports (its findings are the text's, not proof).
std::optional<Failure> scan_program(const CompileResult& compiled, const ProgramText& program, Trace& trace) {
  auto t = Clock::now();
  const auto symbols =
      scan_symbols(compiled.object_paths.empty() ? std::vector<std::string>{compiled.library_path} : compiled.object_paths);
  trace.step("guard: symbols", symbols.empty(), symbols.empty() ? "no timing, allocation or loader symbols" : describe(symbols), t);
  t = Clock::now();
  std::vector<ScanFinding> scan;
  for (const SourceSection* section : {&program.device, &program.host}) {
    for (auto f : static_scan(section->text)) {
      f.line += std::max(section->first_line, 1) - 1;
      scan.push_back(std::move(f));
    }
  }
  trace.step("static scan (report only)", true, describe(scan), t);
  if (!symbols.empty()) return Failure::hack_found(HackKind::timer_tampering, "the program " + describe(symbols));
  return std::nullopt;
}

}  // namespace

Result<CandidateCode> compile_candidate(Compiler& compiler, const Task& task, const ProgramText& program,
                                        const EvalOptions& options, Trace& trace) {
  const auto t = Clock::now();
  if (program.kind == ProgramKind::kernelbench) {
    trace.step("compile", true, "a KernelBench-format module: nothing to compile (its worker's Python runs it)", t);
    return CandidateCode{ProgramKind::kernelbench, "", program.python.text, program.origin};
  }
  CompileResult compiled = compiler.submit({program, task.spec.num_args(), options.backend, ""}).get();
  trace.verdict().compile_log = truncate_log(compiled.log, options.max_log_bytes);
  trace.step("compile", compiled.ok,
             // The host compiler named in every verdict: results files from different nodes (a job's
             // evaluator ranks, crl eval runs) then say which one built what they timed.
             compiled.ok ? fmt::format("{} (host sections: {})",
                                       compiled.cache_hit ? "cache hit" : fmt::format("compiled in {:.2f} s", compiled.seconds),
                                       std::filesystem::path(compiler.host_cxx()).filename().string())
                         : fmt::format("failed at the {} stage", compiled.stage),
             t);
  if (!compiled.ok) return Failure::of(VerdictStatus::kCompileError, fmt::format("does not compile ({} stage)", compiled.stage));
  if (options.hack_guards) {
    if (auto f = scan_program(compiled, program, trace)) return *f;
  }
  return CandidateCode{ProgramKind::crl, compiled.library_path, "", program.origin};
}

}  // namespace crl::eval
