# Uses ccache when present; its sloppiness settings let precompiled headers hit the cache.
find_program(CRL_CCACHE ccache)
if(CRL_CCACHE)
  set(_launcher ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      CCACHE_BASEDIR=${PROJECT_SOURCE_DIR} ${CRL_CCACHE})
  set(CMAKE_C_COMPILER_LAUNCHER ${_launcher})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_launcher})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${_launcher})
  message(STATUS "crl: using ccache at ${CRL_CCACHE}")
endif()
