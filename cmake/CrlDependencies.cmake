# Finds crl's dependencies the standard way; CUDA and NCCL are optional (on when nvcc is found).
include_guard(GLOBAL)

# --- LibTorch: honour CMAKE_PREFIX_PATH / Torch_DIR; otherwise ask a python that has torch. That
# python is also the one KernelBench-format candidates embed (lib/pyprogram): CRL_TORCH_PYTHON.
if(NOT Torch_DIR OR NOT CRL_TORCH_PYTHON)
  set(_crl_pythons "$ENV{CRL_HOME}/venv/bin/python3" "$ENV{HOME}/.local/share/crl/venv/bin/python3" python3)
  foreach(_py IN LISTS _crl_pythons)
    find_program(_crl_py NAMES ${_py} NO_CACHE)
    if(_crl_py)
      execute_process(COMMAND ${_crl_py} -c "import torch;print(torch.utils.cmake_prefix_path)"
                      OUTPUT_VARIABLE _torch_prefix OUTPUT_STRIP_TRAILING_WHITESPACE
                      RESULT_VARIABLE _rc ERROR_QUIET)
      if(_rc EQUAL 0 AND _torch_prefix)
        if(NOT Torch_DIR)
          list(APPEND CMAKE_PREFIX_PATH ${_torch_prefix})
          message(STATUS "crl: LibTorch from ${_crl_py}: ${_torch_prefix}")
        endif()
        if(NOT CRL_TORCH_PYTHON)
          set(CRL_TORCH_PYTHON ${_crl_py} CACHE FILEPATH "the python3 whose torch crl links")
        endif()
        break()
      endif()
    endif()
    unset(_crl_py)
  endforeach()
endif()

# --- CUDA first: TorchConfig of a CUDA build of torch looks for the toolkit itself.
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER AND NOT CRL_DISABLE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90a)  # the H200; override with -DCMAKE_CUDA_ARCHITECTURES=...
  endif()
  enable_language(CUDA)
  set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 for nvcc
  # Tell TorchConfig the target arch so it does not try to run a GPU-detection program.
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "9.0a")
  endif()
  find_package(CUDAToolkit REQUIRED)
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
  find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
  if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
    add_library(crl_nccl INTERFACE)
    target_include_directories(crl_nccl INTERFACE ${NCCL_INCLUDE_DIR})
    target_link_libraries(crl_nccl INTERFACE ${NCCL_LIBRARY})
    set(CRL_HAVE_NCCL ON)
  endif()
  set(CRL_HAVE_CUDA ON)
  set(CRL_CUDA_STATUS "ON (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, arch ${CMAKE_CUDA_ARCHITECTURES}, NCCL ${CRL_HAVE_NCCL})")
else()
  set(CRL_HAVE_CUDA OFF)
  set(CRL_HAVE_NCCL OFF)
  set(CRL_CUDA_STATUS "OFF (no nvcc found: CUDA backend, GPU probes and NCCL are left out of this build)")
endif()

find_package(Torch 2.11 REQUIRED)
# The Python whose torch crl links, embedded by the candidate worker for KernelBench-format
# candidates (lib/pyprogram) and whose headers their torch extensions compile against (lib/compile):
# CRL_PYTHON_MISSING says why not when it cannot be (then such candidates are refused, saying so).
set(CRL_PYTHON_MISSING "")
if(NOT CRL_TORCH_PYTHON)
  set(CRL_PYTHON_MISSING "crl found no python3 with torch at configure time")
else()
  set(Python3_EXECUTABLE ${CRL_TORCH_PYTHON})
  find_package(Python3 COMPONENTS Interpreter Development.Embed QUIET)
  find_library(CRL_TORCH_PYTHON_LIBRARY torch_python HINTS ${TORCH_INSTALL_PREFIX}/lib NO_DEFAULT_PATH)
  if(NOT Python3_Development.Embed_FOUND)
    set(CRL_PYTHON_MISSING "no headers or library of ${CRL_TORCH_PYTHON}'s Python at configure time (Debian: python3-dev)")
  elseif(NOT CRL_TORCH_PYTHON_LIBRARY)
    set(CRL_PYTHON_MISSING "no libtorch_python in ${TORCH_INSTALL_PREFIX}/lib at configure time")
  endif()
endif()
find_package(MPI REQUIRED COMPONENTS C)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
find_package(Threads REQUIRED)
# utf8proc (Unicode categories and NFC for the tokenizer). Debian: libutf8proc-dev. On machines
# without it, tools/gpu-build.sh unpacks carried .debs into .carry/prefix, searched here too.
find_path(UTF8PROC_INCLUDE_DIR utf8proc.h HINTS ${PROJECT_SOURCE_DIR}/.carry/prefix/usr/include)
find_library(UTF8PROC_LIBRARY NAMES utf8proc
             HINTS ${PROJECT_SOURCE_DIR}/.carry/prefix/usr/lib/x86_64-linux-gnu
                   ${PROJECT_SOURCE_DIR}/.carry/prefix/usr/lib)
if(NOT UTF8PROC_INCLUDE_DIR OR NOT UTF8PROC_LIBRARY)
  message(FATAL_ERROR "crl: utf8proc not found (install libutf8proc-dev, or run tools/setup.sh)")
endif()
add_library(crl_utf8proc INTERFACE)
target_include_directories(crl_utf8proc INTERFACE ${UTF8PROC_INCLUDE_DIR})
target_link_libraries(crl_utf8proc INTERFACE ${UTF8PROC_LIBRARY})
if(CRL_BUILD_TESTS)
  find_package(GTest REQUIRED)
  include(GoogleTest)
endif()
if(CRL_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# Torch's own flags (the C++ ABI) apply to everything, so std::string crosses library edges.
string(APPEND CMAKE_CXX_FLAGS " ${TORCH_CXX_FLAGS}")

# Whether this build has CUDA and NCCL, for every file (a build fact; linking is per module).
if(CRL_HAVE_CUDA)
  add_compile_definitions(CRL_HAVE_CUDA=1)
endif()
if(CRL_HAVE_NCCL)
  add_compile_definitions(CRL_HAVE_NCCL=1)
endif()

# MPI for the modules that call it; mpi.h must not drag in the deprecated MPI C++ bindings (they
# need libmpi_cxx).
add_library(crl_mpi INTERFACE)
target_link_libraries(crl_mpi INTERFACE MPI::MPI_C)
target_compile_definitions(crl_mpi INTERFACE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)

# One HDF5 target, whichever way FindHDF5 reported it.
if(NOT TARGET crl_hdf5)
  add_library(crl_hdf5 INTERFACE)
  target_include_directories(crl_hdf5 INTERFACE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  target_link_libraries(crl_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
  target_compile_definitions(crl_hdf5 INTERFACE ${HDF5_C_DEFINITIONS} H5_USE_110_API)
endif()

# LibTorch as one target; targets that include it heavily also use the precompiled header below.
# LibTorch ships its own fmt headers (a newer major version than the system's, which spdlog is
# built against). A -I folder holding only a link to the system fmt comes before Torch's -isystem
# folders, so every crl file sees the fmt it links with.
get_target_property(_fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
find_path(CRL_SYSTEM_FMT_DIR fmt/format.h HINTS ${_fmt_includes} NO_CACHE)
set(CRL_FMT_FIRST_DIR ${PROJECT_BINARY_DIR}/crl_fmt_first)
file(MAKE_DIRECTORY ${CRL_FMT_FIRST_DIR})
file(CREATE_LINK ${CRL_SYSTEM_FMT_DIR}/fmt ${CRL_FMT_FIRST_DIR}/fmt SYMBOLIC)
add_library(crl_torch INTERFACE)
# libstdc++ comes first: the PyPI LibTorch wheel exports std::filesystem functions of its own
# (its remove_all jumps to a null pointer on a non-empty directory), and whichever library is
# listed first supplies them to every crl binary.
target_link_libraries(crl_torch INTERFACE stdc++ ${TORCH_LIBRARIES})
target_include_directories(crl_torch BEFORE INTERFACE ${CRL_FMT_FIRST_DIR})
target_include_directories(crl_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})

# crl_use_torch_pch(target): compile the target against the one shared precompiled LibTorch
# header (built by crl_torch_pch in lib/CMakeLists.txt). One shared header instead of one per
# target: each is about 0.9 GB on disk and half a minute of a CI core.
# GCC accepts a precompiled header only under the same -fPIC/-fPIE setting, so executables that
# use it compile as -fPIC too (their objects still link into position-independent executables).
# crl_use_torch_pch(target [FROM pch_target]): another header target (the tests' is built at -O0).
function(crl_use_torch_pch target)
  cmake_parse_arguments(P "" "FROM" "" ${ARGN})
  set(from crl_torch_pch)
  if(P_FROM)
    set(from ${P_FROM})
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE")
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(${target} PRIVATE -fPIC)
  endif()
  target_precompile_headers(${target} REUSE_FROM ${from})
endfunction()

# crl_add_torch_pch(name [OPTIONS flags...]): a target holding the precompiled <torch/torch.h>.
# It links crl_core so that it is built with the same definitions as the targets reusing it.
function(crl_add_torch_pch name)
  cmake_parse_arguments(P "" "" "OPTIONS" ${ARGN})
  add_library(${name} STATIC ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cpp)
  target_link_libraries(${name} PUBLIC crl_core crl_torch)
  target_compile_options(${name} PRIVATE ${P_OPTIONS})
  target_precompile_headers(${name} PRIVATE <torch/torch.h>)
  set_target_properties(${name} PROPERTIES UNITY_BUILD OFF)  # one file of its own, nothing to batch
  # Clang can keep the header's instantiated templates in the PCH (g++ redoes them in every
  # file): a LibTorch file here compiled in 11.5 CPU s against g++'s 19.2, both with the PCH.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${name} PRIVATE -fpch-instantiate-templates)
  endif()
endfunction()
