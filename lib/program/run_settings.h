// Process-wide ATen settings under which references and candidates run (the crl-worker and
// `crl tasks check`), so that a reference's outputs mean the same everywhere.
#pragma once

#include <string>
#include <string_view>

namespace crl {

// The float32 math an evaluation allows (docs/evaluation.md, "The precision contract"): fp32, or
// tf32 where a job or `crl eval` opts in (`precision: tf32`). Every worker of the evaluation (the
// judge, the reference's timing worker and the candidate's) runs under the same one, so the
// reference is timed with the allowance a candidate gets, and the flag earns no speedup.
enum class Precision { fp32, tf32 };
std::string_view precision_name(Precision p);
// InputError for a name other than fp32 or tf32.
Precision parse_precision(std::string_view name);

// Under fp32, float32 matrix products, convolutions and RNNs in full fp32 on the GPU: PyTorch lets
// cuDNN use TF32 for float32 convolutions by default, whose ~1e-3 relative error is ten times the
// float32 tolerance, so a reference computed that way would fail a candidate that computes exactly.
// Under tf32, all three may use TF32 (cuBLAS and cuDNN pick). A candidate that sets its own process's
// precision lower than the evaluation's is judged by the precision contract like any other trick.
// The CPU has no TF32 path: both settings compute in fp32 there.
void apply_program_run_settings(Precision precision = Precision::fp32);

}  // namespace crl
