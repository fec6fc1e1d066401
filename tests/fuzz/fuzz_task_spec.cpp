// libFuzzer harness: a task spec (the YAML spec section of a reference program) and, through it,
// its expressions; inputs that parse are evaluated at every scale, as the evaluator does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "program/program_text.h"
#include "program/task_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  crl::SourceSection section;
  section.present = true;
  section.text.assign(reinterpret_cast<const char*>(data), size);
  section.first_line = 2;
  try {
    const crl::TaskSpec spec = crl::parse_task_spec(section, "fuzz.crl");
    for (const auto& scale : spec.scale_names()) {
      for (size_t i = 0; i < spec.num_args(); ++i) spec.shape_at(spec.arg(i), scale);
      spec.flops_at(scale);
      spec.bytes_at(scale);
      if (spec.kernelbench_params) {
        for (const auto& t : spec.kernelbench_params->parameters) spec.kernelbench_shape_at(t, scale);
        for (const auto& t : spec.kernelbench_params->buffers) spec.kernelbench_shape_at(t, scale);
      }
    }
  } catch (const crl::InputError&) {
  }
  return 0;
}
