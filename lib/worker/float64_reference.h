// The reference's float64 outputs for the precision contract (docs/evaluation.md). The judge runs
// the reference once more on the same arguments in float64, and once more in float32 on arguments
// nudged by a rounding step (each element, at random, one float32 step up, down or left alone), and
// keeps per float32 output two bfloat16 tensors of its size: the float32 reference's error against
// float64 (the float64 outputs are the float32 ones plus it, to within 2^-9 of the error: far below
// the bound), and the scale of the error float32 arithmetic may make there (that error's size plus
// how far the nudge moved the output: the output's sensitivity to float32 rounding, which a lucky
// element's error alone understates). So the contract costs one output's memory beside the float32
// outputs, not two. Where the float64 run does not fit the judge's memory, it runs on chunks of
// samples (dim 0) and is kept only if every output is per sample.
#pragma once

#include <ATen/Tensor.h>

#include <functional>
#include <string>
#include <vector>

#include "program/task_spec.h"

namespace crl::worker {

struct Float64Reference {
  // Per output: float32 outputs get their float32 reference's error against float64 (0 where either
  // is not finite) and the error scale (both bfloat16); other dtypes undefined tensors (their own
  // tolerance decides).
  std::vector<at::Tensor> deltas, scales;
  std::string missing;  // "": every float32 output has both; else why not (all undefined then)
  int runs = 0;         // reference runs in float64 (1: whole; more: chunks of samples)
};

using ProgramRun = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

// `args`: the call's arguments as the float32 reference got them (made again from their seed: the
// reference may write into its inputs), nudged in place for the nudged run (so a caller that keeps
// handles to them sees them nudged); floating ones are converted
// to float64 here (in chunks of samples, when the whole does not fit). `r32`: its float32 outputs.
// `release_memory` is called after an out-of-memory error, before a smaller try. Errors of the
// reference in float64 (a kernel of float only, a dtype it fixes) are not thrown: they make `missing`
// say so.
Float64Reference float64_reference(const ProgramRun& run, const TaskSpec& spec, std::vector<at::Tensor> args,
                                   const std::vector<at::Tensor>& r32, const std::function<void()>& release_memory);

// One output's error: (o64 - r32) in bfloat16, 0 where either is not finite; in chunks, so the
// temporaries stay small whatever the output's size.
at::Tensor float64_delta(const at::Tensor& o64, const at::Tensor& r32);

// Every floating argument nudged in place: each element multiplied by (1 - eps), (1 + eps) or left
// alone (a quarter, a quarter, half; eps its dtype's machine epsilon), from a fixed generator.
void nudge_arguments(std::vector<at::Tensor>& args);

}  // namespace crl::worker
