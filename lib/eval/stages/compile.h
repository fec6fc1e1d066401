// The compile stage: the candidate compiled (or found in the cache), then, with the hack guards
// on, the symbol guard and the static scan on the program's own objects and text. A KernelBench-format
// module has nothing to compile here: its text goes to the worker as it is.
#pragma once

#include "compile/compiler.h"
#include "eval/failure.h"
#include "eval/stages/evaluation.h"
#include "program/program_text.h"

namespace crl::eval {

// compile_error when it does not compile; hack:timer_tampering when its objects define or import
// what a program may not (guard_symbols.h). Sets the verdict's compile log.
Result<CandidateCode> compile_candidate(Compiler& compiler, const Task& task, const ProgramText& program,
                                        const EvalOptions& options, Trace& trace);

}  // namespace crl::eval
