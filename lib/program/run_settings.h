// Process-wide ATen settings under which references and candidates run (the crl-worker and
// `crl tasks check`), so that a reference's outputs mean the same everywhere.
#pragma once

namespace crl {

// float32 matrix products and convolutions in full fp32: PyTorch lets cuDNN use TF32 for float32
// convolutions by default, whose ~1e-3 relative error is ten times the float32 tolerance, so a
// reference computed that way would fail a candidate that computes exactly. A candidate that
// opts into TF32 itself is judged by the tolerance like any other lower-precision trick.
void apply_program_run_settings();

}  // namespace crl
