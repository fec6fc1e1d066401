# Links with lld where the C++ compiler can use it (tools/setup.sh installs it): crl's ~100 programs
# each link LibTorch: ld.bfd took 1.0-1.2 s a test program and lld 0.22 s (crl itself 3.7 s and 0.8 s;
# 2-core machine, docs/building.md). Elsewhere the system's default linker. -DCRL_USE_LLD=OFF keeps the default.
option(CRL_USE_LLD "Link with lld where the C++ compiler can" ON)
if(CRL_USE_LLD)
  include(CheckLinkerFlag)
  check_linker_flag(CXX "-fuse-ld=lld" CRL_LINKER_LLD_WORKS)
  if(CRL_LINKER_LLD_WORKS)
    add_link_options(-fuse-ld=lld)
    message(STATUS "crl: linking with lld")
  endif()
endif()
