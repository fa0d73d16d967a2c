# Common part of toolchains/cray-cce.cmake and toolchains/cray-gnu.cmake:
# building on an HPE Cray EX login node, through the PrgEnv compiler
# wrappers cc/CC/ftn, for the x86_64 compute nodes.
#
# Why a toolchain at all when login and compute nodes are both x86_64:
# configure-time test programs built for the compute nodes (craype-x86-*
# target modules, Slingshot/MPI libraries) may not run, or give other
# answers, on the login node. Declaring the build a cross build makes plain
# CMake try_run() refuse to execute anything; the -C pre-seed file
# (toolchains/preseed/cray-ex-*.cmake) supplies those answers instead.

# Setting CMAKE_SYSTEM_NAME is what flips CMAKE_CROSSCOMPILING to TRUE.
# "Linux", not CMake's "CrayLinuxEnvironment" platform, which was written for
# XC-era CLE compute nodes (it reads CLE release files); EX compute nodes run
# a regular SLES-based Linux.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

# ecbuild's Fortran feature checks look at CROSS_COMPILING (not
# CMAKE_CROSSCOMPILING); with it they only compile.
set(CROSS_COMPILING ON)

# The PE's drivers cc/CC/ftn add the target flags, MPI and libsci of the loaded
# modules: a build by hand, or ReFrame's, compiles through them. A compiler chosen
# the usual CMake ways (-DCMAKE_<LANG>_COMPILER, or CC/CXX/FC in the environment)
# takes precedence: Spack sets CC/CXX/FC to its own wrappers, named after the
# compiler, which call these same drivers with the compiler's modules loaded, as
# ARCHER2's Spack 1.0.2 does [EPCC-Spack], and gives MPI and libsci as
# dependencies too (cray-mpich, cray-libsci).
foreach(_pair "C;CC;cc" "CXX;CXX;CC" "Fortran;FC;ftn")
  list(GET _pair 0 _lang)
  list(GET _pair 1 _envvar)
  list(GET _pair 2 _wrapper)
  if(NOT CMAKE_${_lang}_COMPILER AND "$ENV{${_envvar}}" STREQUAL "")
    set(CMAKE_${_lang}_COMPILER ${_wrapper})
  endif()
endforeach()
unset(_pair)
unset(_lang)
unset(_envvar)
unset(_wrapper)

# Warn early when the loaded PrgEnv does not match the toolchain file (the
# Bit and OpenMP flags below are compiler specific). PrgEnv-* set PE_ENV.
if(DEFINED ENV{PE_ENV} AND NOT "$ENV{PE_ENV}" STREQUAL "${IOSTACK_CRAY_PE_ENV}")
  message(WARNING "iostack: ${CMAKE_CURRENT_LIST_FILE} expects PrgEnv with PE_ENV=${IOSTACK_CRAY_PE_ENV}, "
                  "but PE_ENV=$ENV{PE_ENV}; load the matching PrgEnv module or use the other toolchain file.")
endif()

# ---- link policy -------------------------------------------------------------
# Dynamic linking, stated explicitly. craype >= 2.6 (CPE 19.06 and later)
# links dynamically by default, but a stale CRAYPE_LINK_TYPE=static in
# someone's environment would silently change that; "-dynamic" on the link
# line wins over the environment. The environment variable covers the
# configure-time compiler checks, which do not all see the linker flags.
# Both are the drivers' (craype's) options, given where the compiler is called
# cc: Spack's wrappers are named after the compiler (gcc, craycc) and call the
# drivers, which link dynamically by default; gcc itself would read "-dynamic"
# as debugging options -d y n a m i c.
set(_iostack_c_compiler "${CMAKE_C_COMPILER}")
if(NOT _iostack_c_compiler)
  set(_iostack_c_compiler "$ENV{CC}")
endif()
get_filename_component(_iostack_c_compiler "${_iostack_c_compiler}" NAME)
if(_iostack_c_compiler STREQUAL "cc")
  set(ENV{CRAYPE_LINK_TYPE} dynamic)
  # Executables only: shared objects are dynamic by construction.
  if(NOT CMAKE_EXE_LINKER_FLAGS_INIT MATCHES "(^| )-dynamic( |$)")
    string(APPEND CMAKE_EXE_LINKER_FLAGS_INIT " -dynamic")
  endif()
endif()
unset(_iostack_c_compiler)

# ---- RPATH policy ------------------------------------------------------------
# Installed binaries must find their libraries on the compute nodes without
# a module environment, and keep using the library versions they were built
# against:
#  * absolute RPATHs, not $ORIGIN-relative ones: `srun --bcast` copies the
#    executable to node-local storage, where $ORIGIN/../lib does not exist.
#    ENABLE_RELATIVE_RPATHS is ecbuild's switch (default ON there).
#  * the install prefix's lib dirs (lib for ecbuild, lib64 for
#    GNUInstallDirs on SUSE-based compute images), so pass
#    -DCMAKE_INSTALL_PREFIX at configure time;
#  * directories of libraries linked by path (e.g. Spack dependencies):
#    CMAKE_INSTALL_RPATH_USE_LINK_PATH;
#  * the Cray PE library directories of the loaded module versions
#    (CRAY_LD_LIBRARY_PATH, set by the PE modules), which otherwise resolve
#    to the site default versions in /opt/cray/pe/lib64 at run time.
#    Turn off with -DIOSTACK_CRAY_RPATH_PE=OFF.
set(ENABLE_RELATIVE_RPATHS OFF CACHE BOOL "ecbuild: relative RPATHs (off on Cray: srun --bcast)")
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
set(CMAKE_SKIP_BUILD_RPATH OFF)
set(CMAKE_BUILD_WITH_INSTALL_RPATH OFF)
option(IOSTACK_CRAY_RPATH_PE "RPATH to the Cray PE library directories of the loaded modules" ON)

# Start from what the caller passed (Spack passes its dependencies' lib dirs
# as -DCMAKE_INSTALL_RPATH): a plain set() here would hide that cache entry.
set(CMAKE_INSTALL_RPATH "$CACHE{CMAKE_INSTALL_RPATH}")
set(CMAKE_BUILD_RPATH "$CACHE{CMAKE_BUILD_RPATH}")
if(CMAKE_INSTALL_PREFIX)
  list(APPEND CMAKE_INSTALL_RPATH "${CMAKE_INSTALL_PREFIX}/lib" "${CMAKE_INSTALL_PREFIX}/lib64")
endif()
if(IOSTACK_CRAY_RPATH_PE AND NOT "$ENV{CRAY_LD_LIBRARY_PATH}" STREQUAL "")
  string(REPLACE ":" ";" _iostack_pe_dirs "$ENV{CRAY_LD_LIBRARY_PATH}")
  list(REMOVE_ITEM _iostack_pe_dirs "")
  list(APPEND CMAKE_INSTALL_RPATH ${_iostack_pe_dirs})
  list(APPEND CMAKE_BUILD_RPATH ${_iostack_pe_dirs})
  unset(_iostack_pe_dirs)
endif()

include("${CMAKE_CURRENT_LIST_DIR}/compiler-flags.cmake")
