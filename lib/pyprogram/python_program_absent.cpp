// python_program.h where crl was configured without an embeddable Python: every KernelBench-format
// candidate is refused with the reason (lib/pyprogram/CMakeLists.txt says what was missing).
#include "pyprogram/python_program.h"

namespace crl::pyprogram {

struct PythonProgramState {};

bool python_available() { return false; }

std::string python_description() { return "no embedded Python: " CRL_PYTHON_MISSING; }

std::vector<std::string> start_python() { throw FormatError("this crl-worker cannot judge KernelBench-format candidates: " + python_description()); }

PythonProgram::PythonProgram(const std::string&, const std::string&, const std::vector<ExtensionLibrary>&, const TaskSpec&,
                             const std::string&, at::Device, const BuildRule&) {
  (void)start_python();
}

PythonProgram::~PythonProgram() = default;

std::vector<at::Tensor> PythonProgram::forward(const std::vector<at::Tensor>&) const { return {}; }

FixedParams PythonProgram::param_values() const { return {}; }

}  // namespace crl::pyprogram
