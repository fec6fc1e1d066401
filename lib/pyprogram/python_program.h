// A KernelBench-format candidate run in crl-worker's embedded Python: its module executed, its
// `ModelNew` built with the task's init_args, given the task's parameter values and called with its
// inputs (docs/evaluation.md, "KernelBench-format candidates"). No Python header leaks out of here.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "program/arguments.h"
#include "program/task_spec.h"

namespace crl::pyprogram {

// The candidate's fault, in the verdict's terms: it is not a KernelBench module crl can judge
// (no ModelNew, parameters that do not match the task's), or its module does not import.
class FormatError : public Error {
 public:
  using Error::Error;
};
class ImportError : public Error {
 public:
  using Error::Error;
};
// The module called torch.utils.cpp_extension.load_inline for extensions it was not given: `calls`
// is their JSON array (each {key, name, cpp_sources, cuda_sources, functions, bindings, extra_cflags,
// extra_cuda_cflags, extra_ldflags}), for crl's compiler to build before the candidate is loaded again.
class NeedsBuild : public Error {
 public:
  NeedsBuild(std::string calls) : Error("the module's load_inline extensions are not built yet"), calls_(std::move(calls)) {}
  const std::string& calls() const { return calls_; }

 private:
  std::string calls_;
};

// A load_inline call's key (as the worker computed it) and the built module's library, or why crl's
// compiler could not build it (then the call raises, as torch's load_inline does).
struct ExtensionLibrary {
  std::string key, library;
  std::string error;
};

// Whether this build embeds Python (crl was configured with the headers and library of the Python
// whose torch it links), and which Python that is (or why there is none).
bool python_available();
std::string python_description();

// Starts the interpreter (isolated: no environment variables, no user site, no bytecode written)
// and imports torch, torch.nn and torch.nn.functional, before the sandbox's file rules go on.
// Returns the folders the interpreter reads modules from (its standard library and site-packages),
// for the file rules to keep readable. Throws Error when Python or torch does not start; a second
// call returns the same folders.
std::vector<std::string> start_python();

struct PythonProgramState;  // the interpreter's objects (python_program.cpp)

// How the module is built and where its tensors' values come from.
struct BuildRule {
  // "ModelNew" for a candidate; "Model" for KernelBench's own module (the judge's, under its rule).
  std::string class_name = "ModelNew";
  // 0: crl's rule: the module's parameters and buffers are matched to the spec's by order and shape,
  // and given the task's values (the judge's secret ones, fresh for every call) before each call.
  // Otherwise KernelBench's rule: torch.manual_seed(seed), the module built on the CPU and moved to
  // the device (as KernelBench builds Model and ModelNew), keeping the values it made itself.
  uint64_t seed = 0;
};

class PythonProgram {
 public:
  // Executes `source` as a module named after `origin` (its load_inline calls import `extensions`
  // where built, and throw NeedsBuild otherwise), then builds ModelNew(*init_args) at `scale`
  // on `device` and matches its parameters and buffers to the spec's kernelbench_params by order
  // and shape (and dtype where a crl param holds the value). Throws ImportError when the module
  // raises, FormatError when it defines no nn.Module ModelNew or its tensors do not match (the
  // message names what differs), Error when the constructor raises.
  // Under KernelBench's rule (`rule.seed` set) the candidate's tensors are not matched: a ModelNew may
  // hold other ones (fused, precomputed) as long as its outputs are right; KernelBench's own Model is
  // matched, to give its values to crl's reference (param_values).
  PythonProgram(const std::string& source, const std::string& origin, const std::vector<ExtensionLibrary>& extensions,
                const TaskSpec& spec, const std::string& scale, at::Device device, const BuildRule& rule = {});
  ~PythonProgram();
  PythonProgram(const PythonProgram&) = delete;
  PythonProgram& operator=(const PythonProgram&) = delete;

  // Binds the params among `args` (inputs first, then params: the .crl calling convention) to the
  // module's tensors (crl's rule; under KernelBench's the module keeps its own), then calls
  // forward(*inputs) under no_grad. Returns its tensor or the tensors of
  // its tuple or list. Throws Error with Python's traceback when forward raises, and when it returns
  // anything but plain tensors (a subclass could compute inside the judge's comparison).
  std::vector<at::Tensor> forward(const std::vector<at::Tensor>& args) const;

  // The values of the spec's params that the module's matched tensors hold, each as crl holds the
  // param (its shape and layout), by the param's index; params no tensor of the module holds are
  // absent. For KernelBench's Model under its rule: the values crl's reference is given.
  FixedParams param_values() const;

 private:
  std::unique_ptr<PythonProgramState> state_;
};

}  // namespace crl::pyprogram
