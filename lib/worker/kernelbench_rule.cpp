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
    // Two causes seen: a module that hard-codes its widths (level3's VGG, DenseNet, MobileNet, Swin)
    // matches the spec's tensors at scale full only; and a checkout of another KernelBench version.
    throw Error(fmt::format("{} (KernelBench's rule needs the module's tensors to be the spec's: a module that hard-codes its "
                            "sizes matches at scale full only; else the checkout is not the KernelBench version the suite "
                            "was made from)",
                            e.what()));
  }
}

}  // namespace crl::worker
