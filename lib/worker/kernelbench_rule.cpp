// Model's values under KernelBench's rule, for the judge and for a .crl candidate's own guard inputs.
#include "worker/kernelbench_rule.h"

#include <fmt/format.h>

#include "core/error.h"
#include "pyprogram/python_program.h"

namespace crl::worker {

FixedParams kernelbench_param_values(const std::string& module, uint64_t seed, const TaskSpec& spec, const std::string& scale,
                                     const at::Device& device) {
  if (module.empty()) throw Error("KernelBench's rule for parameters needs the task's KernelBench module");
  (void)pyprogram::start_python();
  const std::string origin = fmt::format("KernelBench's module for {}", spec.id);
  try {
    const pyprogram::PythonProgram model(module, origin, {}, spec, scale, device, {.class_name = "Model", .seed = seed});
    return model.param_values();
  } catch (const pyprogram::FormatError& e) {
    throw Error(fmt::format("{} (is the checkout the KernelBench version the suite was made from?)", e.what()));
  }
}

}  // namespace crl::worker
