# The configure-time checks of the iostack stack that need the *target*
# machine, collected in one place. Included after project() by the probe
# project (regenerate.sh) and by the toolchain tests. Each check is skipped
# when its result variable is already defined, which is how the
# toolchains/preseed/<target>.cmake files (-C) replace them.
#
# Where the names come from:
#   ecbuild 3.7   ecbuild_check_os: CMAKE_SIZEOF_VOID_P; large file support:
#                 EC_SIZEOF_OFF_T (check_type_size); EC_BIG/LITTLE_ENDIAN
#   ecbuild <=2.8 (bundled with older eckit/OpenIFS): EC_SIZEOF_<TYPE>,
#                 EC_SIZEOF_PTR, and the run checks EC_HAVE_PROCFS and
#                 EC_ATTRIBUTE_CONSTRUCTOR_INITS_ARGV
#   eccodes       ECCODES_SIZEOF_{INT,LONG,SIZE_T}; IEEE_BE / IEEE_LE
#                 (check_c_source_runs, fatal on failure)
#   eckit         ECKIT_SIZEOF_TIME_T
#   fdb           SIZEOF_OFF_T
#   iostack       IOSTACK_LDBL_MANT_DIG: a target-specific answer (x86_64 64,
#                 aarch64 113) that shows whether a configure really saw the target.
# Only variables that end up in the CMake cache can be pre-seeded; every
# name recorded below is cached. Each is recorded with what fixes its value
# on a target (the C ABI, the C library, the kernel): regenerate.sh writes it
# above the value. Nothing that depends on the compiler is pre-seeded, since
# one file serves every compiler of a target (PrgEnv-cray and PrgEnv-gnu on
# the Cray EX). So ecbuild's Fortran feature checks are not pre-seeded: with
# CROSS_COMPILING set (every iostack toolchain sets it) they only compile,
# which answers for the compiler in use without running anything.

include(CheckTypeSize)
include(CheckCSourceRuns)
include(CMakePushCheckState)
include(ecbuild_check_c_source_return)
include(ecbuild_check_fortran)

set(IOSTACK_PRESEED_VARS "")
set(IOSTACK_PRESEED_SOURCES "")
macro(_iostack_record source)
  foreach(_v ${ARGN})
    list(APPEND IOSTACK_PRESEED_VARS ${_v})
    list(APPEND IOSTACK_PRESEED_SOURCES "${source}")
  endforeach()
endmacro()
# What fixes the values on the target, for the comments of the pre-seed files.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(_iostack_abi "C ABI of aarch64 Linux, LP64: AAPCS64, C language mappings")
  set(_iostack_ldbl "C ABI: long double is IEEE 754 binary128, 16 bytes, 113-bit significand (AAPCS64)")
  set(_iostack_order "C ABI: little-endian (aarch64-linux-gnu), IEEE 754 float and double (AAPCS64)")
else()
  set(_iostack_abi "C ABI of x86_64 Linux, LP64: x86-64 psABI 3.1.2, Figure 3.1")
  set(_iostack_ldbl "C ABI: long double is x87 80-bit extended in 16 bytes, 64-bit significand (x86-64 psABI 3.1.2)")
  set(_iostack_order "C ABI: little-endian, IEEE 754 float and double (x86-64 psABI 3.1.2)")
endif()
set(_iostack_glibc "C library: glibc on 64-bit Linux has 64-bit off_t and time_t (bits/typesizes.h)")

# regenerate.sh --emulate: ecbuild_try_run runs check programs with
# execute_process and ignores CMAKE_CROSSCOMPILING_EMULATOR; for the probe
# only, route it through try_run, which honours the emulator.
if(IOSTACK_PROBE_EMULATE)
  if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
    message(FATAL_ERROR "IOSTACK_PROBE_EMULATE needs a toolchain that sets CMAKE_CROSSCOMPILING_EMULATOR")
  endif()
  function(ecbuild_try_run RUN_RESULT_VAR COMPILE_RESULT_VAR BINDIR SRCFILE)
    cmake_parse_arguments(_p "" "COMPILE_OUTPUT_VARIABLE;RUN_OUTPUT_VARIABLE;OUTPUT_VARIABLE"
                          "CMAKE_FLAGS;COMPILE_DEFINITIONS;LINK_LIBRARIES;ARGS" ${ARGN})
    set(_opts "")
    foreach(_opt CMAKE_FLAGS COMPILE_DEFINITIONS LINK_LIBRARIES ARGS)
      if(_p_${_opt})
        list(APPEND _opts ${_opt} ${_p_${_opt}})
      endif()
    endforeach()
    # try_run caches its run result: one result variable per check.
    try_run(_iostack_run_${RUN_RESULT_VAR} _compiled "${BINDIR}" "${SRCFILE}" ${_opts}
            COMPILE_OUTPUT_VARIABLE _cout
            RUN_OUTPUT_STDOUT_VARIABLE _rout)
    set(_run "${_iostack_run_${RUN_RESULT_VAR}}")
    if(NOT _compiled)
      set(_run FAILED_TO_RUN)
    endif()
    set(${RUN_RESULT_VAR} "${_run}" PARENT_SCOPE)
    set(${COMPILE_RESULT_VAR} "${_compiled}" PARENT_SCOPE)
    foreach(_v COMPILE_OUTPUT_VARIABLE RUN_OUTPUT_VARIABLE OUTPUT_VARIABLE)
      if(_p_${_v})
        if(_v STREQUAL "COMPILE_OUTPUT_VARIABLE")
          set(${_p_${_v}} "${_cout}" PARENT_SCOPE)
        else()
          set(${_p_${_v}} "${_rout}" PARENT_SCOPE)
        endif()
      endif()
    endforeach()
  endfunction()
endif()

# The run checks below always exit 0 once their program runs, so an empty
# result means the program did not build or could not be started (an aarch64
# binary on an x86_64 host is even handed to /bin/sh by execute_process and
# "fails" with a plain exit code). Stop rather than record a wrong answer.
macro(_iostack_require_ran var)
  if(NOT ${var})
    message(FATAL_ERROR
      "iostack probe: the test program of ${var} did not run on this host "
      "(exit code '${${var}_EXITCODE}'). Cross-compiling? ecbuild runs its "
      "check programs directly and ignores CMAKE_CROSSCOMPILING_EMULATOR: "
      "configure with -C toolchains/preseed/<target>.cmake.")
  endif()
endmacro()

# -- type sizes (compile-only checks; pinned so configure is deterministic
#    and fast behind slow compiler wrappers) ---------------------------------
macro(_iostack_type_size type var source)
  check_type_size("${type}" ${var} LANGUAGE C)
  _iostack_record("${source}" HAVE_${var} ${var})
endmacro()

# Computed by ecbuild itself during project(); recorded here.
_iostack_record("${_iostack_abi}" HAVE_CMAKE_SIZEOF_VOID_P CMAKE_SIZEOF_VOID_P)
if(DEFINED HAVE_EC_SIZEOF_OFF_T)
  _iostack_record("${_iostack_glibc}" HAVE_EC_SIZEOF_OFF_T EC_SIZEOF_OFF_T)
endif()

_iostack_type_size(int      ECCODES_SIZEOF_INT    "${_iostack_abi}")
_iostack_type_size(long     ECCODES_SIZEOF_LONG   "${_iostack_abi}")
_iostack_type_size(size_t   ECCODES_SIZEOF_SIZE_T "${_iostack_abi}")
_iostack_type_size(off_t    SIZEOF_OFF_T          "${_iostack_glibc}")
cmake_push_check_state()
set(CMAKE_EXTRA_INCLUDE_FILES time.h)
_iostack_type_size(time_t   ECKIT_SIZEOF_TIME_T   "${_iostack_glibc}")
cmake_pop_check_state()

foreach(_t char short int long "long long" float double "long double" size_t ssize_t)
  string(TOUPPER "${_t}" _T)
  string(REPLACE " " "_" _T "${_T}")
  if(_T STREQUAL "LONG_DOUBLE")
    _iostack_type_size("${_t}" EC_SIZEOF_${_T} "${_iostack_ldbl}")
  else()
    _iostack_type_size("${_t}" EC_SIZEOF_${_T} "${_iostack_abi}")
  endif()
endforeach()
if(NOT DEFINED EC_SIZEOF_PTR)
  set(EC_SIZEOF_PTR "${CMAKE_SIZEOF_VOID_P}" CACHE INTERNAL "sizeof(void*)")
endif()
_iostack_record("${_iostack_abi}" EC_SIZEOF_PTR)

# -- byte order ----------------------------------------------------------------
# ecbuild derives EC_BIG/LITTLE_ENDIAN at compile time and sets them as
# normal variables, which shadow these cache entries; cached here so a
# pre-seed file states the target's byte order for readers and old ecbuild.
if(NOT DEFINED EC_BIG_ENDIAN OR NOT DEFINED EC_LITTLE_ENDIAN)
  message(FATAL_ERROR "iostack probe: ecbuild did not set EC_BIG_ENDIAN/EC_LITTLE_ENDIAN")
endif()
set(EC_BIG_ENDIAN "${EC_BIG_ENDIAN}" CACHE INTERNAL "target is big endian")
set(EC_LITTLE_ENDIAN "${EC_LITTLE_ENDIAN}" CACHE INTERNAL "target is little endian")
_iostack_record("${_iostack_order}" EC_BIG_ENDIAN EC_LITTLE_ENDIAN)

# -- ecbuild_check_c_source_return (legacy ecbuild run checks + iostack) ------
if(NOT DEFINED EC_HAVE_PROCFS)
  ecbuild_check_c_source_return("
#include <dirent.h>
#include <stdio.h>
int main(void)
{
    DIR* d = opendir(\"/proc/self\");
    printf(\"%d\", d != NULL);
    return 0;
}" VAR IOSTACK_RAN_PROCFS OUTPUT IOSTACK_PROCFS_OUTPUT)
  _iostack_require_ran(IOSTACK_RAN_PROCFS)
  set(EC_HAVE_PROCFS "${IOSTACK_PROCFS_OUTPUT}" CACHE INTERNAL "/proc is readable")
endif()

if(NOT DEFINED EC_ATTRIBUTE_CONSTRUCTOR_INITS_ARGV)
  ecbuild_check_c_source_return("
#include <stdio.h>
static int ctor_argc = -1;
static int ctor_argv_ok = 0;
__attribute__((constructor))
static void iostack_ctor(int argc, char** argv, char** envp)
{
    (void)envp;
    ctor_argc = argc;
    ctor_argv_ok = (argv != NULL && argv[0] != NULL);
}
int main(int argc, char** argv)
{
    (void)argv;
    printf(\"%d\", (ctor_argc == argc && ctor_argv_ok) ? 1 : 0);
    return 0;
}" VAR IOSTACK_RAN_CTOR_ARGV OUTPUT IOSTACK_CTOR_ARGV_OUTPUT)
  _iostack_require_ran(IOSTACK_RAN_CTOR_ARGV)
  set(EC_ATTRIBUTE_CONSTRUCTOR_INITS_ARGV "${IOSTACK_CTOR_ARGV_OUTPUT}" CACHE INTERNAL
      "constructors receive argc/argv")
endif()
_iostack_record("Linux: procfs is mounted at /proc (proc(5)), as on every node systemd boots" EC_HAVE_PROCFS)
_iostack_record("C library: glibc calls ELF constructors with (argc, argv, envp) (elf/dl-init.c, call_init)"
                EC_ATTRIBUTE_CONSTRUCTOR_INITS_ARGV)

ecbuild_check_c_source_return("
#include <float.h>
#include <stdio.h>
int main(void) { printf(\"%d\", LDBL_MANT_DIG); return 0; }"
  VAR IOSTACK_HAVE_LDBL_MANT_DIG OUTPUT IOSTACK_LDBL_MANT_DIG)
_iostack_require_ran(IOSTACK_HAVE_LDBL_MANT_DIG)
_iostack_record("${_iostack_ldbl}" IOSTACK_HAVE_LDBL_MANT_DIG IOSTACK_LDBL_MANT_DIG)

# -- plain CMake run check (eccodes) ---------------------------------------
# Does the compiled code store IEEE doubles/floats big/little endian?
# check_c_source_runs honours CMAKE_CROSSCOMPILING: with neither emulator
# nor pre-seed it stops the configure (CMake 3.25.1 even crashes there).
foreach(_order BE LE)
  if(NOT DEFINED IEEE_${_order})
    if(_order STREQUAL "LE")
      set(_little 1)
    else()
      set(_little 0)
    endif()
    check_c_source_runs("
#include <string.h>
int main(void)
{
    const unsigned char d_be[8] = {0x3f, 0xf0, 0, 0, 0, 0, 0, 0};  /* 1.0  */
    const unsigned char f_be[4] = {0x3f, 0x80, 0, 0};              /* 1.0f */
    unsigned char d[8], f[4];
    double x = 1.0;
    float y = 1.0f;
    int i, little = ${_little};
    if (sizeof(double) != 8 || sizeof(float) != 4) return 1;
    memcpy(d, &x, 8);
    memcpy(f, &y, 4);
    for (i = 0; i < 8; i++) if (d[i] != d_be[little ? 7 - i : i]) return 1;
    for (i = 0; i < 4; i++) if (f[i] != f_be[little ? 3 - i : i]) return 1;
    return 0;
}" IEEE_${_order})
    if("${IEEE_${_order}}" STREQUAL "")
      set(IEEE_${_order} 0 CACHE INTERNAL "Test IEEE_${_order}")
    endif()
  endif()
  _iostack_record("${_iostack_order}" IEEE_${_order})
endforeach()

# -- Fortran -------------------------------------------------------------------
# All of ecbuild 3.7's Fortran feature checks; not recorded (see the top).
set(IOSTACK_Fortran_FEATURES c_size_t c_sizeof derivedtype_interface derivedtype_io finalization submodules)
ecbuild_check_fortran(FEATURES ${IOSTACK_Fortran_FEATURES})

unset(_t)
unset(_v)
unset(_T)
unset(_f)
unset(_F)
unset(_order)
unset(_little)
