# The configure-time checks of the iostack stack that need the *target*
# machine, collected in one place. Included after project() by the probe
# project (regenerate.sh) and by the toolchain tests. Each check is skipped
# when its result variable is already defined, which is how the
# toolchains/preseed/<target>.cmake files (-C) replace them.
#
# Where the names come from:
#   ecbuild 3.7   ecbuild_check_os: CMAKE_SIZEOF_VOID_P, EC_SIZEOF_OFF_T
#                 (check_type_size), EC_BIG/LITTLE_ENDIAN, Fortran feature
#                 checks HAS_Fortran_<FEATURE> (run unless CROSS_COMPILING)
#   ecbuild <=2.8 (bundled with older eckit/OpenIFS): EC_SIZEOF_<TYPE>,
#                 EC_SIZEOF_PTR, and the run checks EC_HAVE_PROCFS and
#                 EC_ATTRIBUTE_CONSTRUCTOR_INITS_ARGV
#   eccodes       ECCODES_SIZEOF_{INT,LONG,SIZE_T}; IEEE_BE / IEEE_LE
#                 (check_c_source_runs, fatal on failure)
#   eckit         ECKIT_SIZEOF_TIME_T
#   fdb           SIZEOF_OFF_T
#   iostack       IOSTACK_LDBL_MANT_DIG, IOSTACK_Fortran_LDBL_PRECISION:
#                 target-specific answers (x86_64 64/18, aarch64 113/33) that
#                 show whether a configure really saw the target.
# Only variables that end up in the CMake cache can be pre-seeded; every
# name recorded below is cached.

include(CheckTypeSize)
include(CheckCSourceRuns)
include(CMakePushCheckState)
include(ecbuild_check_c_source_return)
include(ecbuild_check_fortran_source_return)
include(ecbuild_check_fortran)

set(IOSTACK_PRESEED_VARS "")

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
  # ecbuild's Fortran feature checks only compile when CROSS_COMPILING is
  # set; the probe wants the run-time answer.
  set(CROSS_COMPILING OFF)
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
macro(_iostack_type_size type var)
  check_type_size("${type}" ${var} LANGUAGE C)
  list(APPEND IOSTACK_PRESEED_VARS HAVE_${var} ${var})
endmacro()

# Computed by ecbuild itself during project(); recorded here.
list(APPEND IOSTACK_PRESEED_VARS HAVE_CMAKE_SIZEOF_VOID_P CMAKE_SIZEOF_VOID_P)
if(DEFINED HAVE_EC_SIZEOF_OFF_T)
  list(APPEND IOSTACK_PRESEED_VARS HAVE_EC_SIZEOF_OFF_T EC_SIZEOF_OFF_T)
endif()

_iostack_type_size(int      ECCODES_SIZEOF_INT)
_iostack_type_size(long     ECCODES_SIZEOF_LONG)
_iostack_type_size(size_t   ECCODES_SIZEOF_SIZE_T)
_iostack_type_size(off_t    SIZEOF_OFF_T)
cmake_push_check_state()
set(CMAKE_EXTRA_INCLUDE_FILES time.h)
_iostack_type_size(time_t   ECKIT_SIZEOF_TIME_T)
cmake_pop_check_state()

foreach(_t char short int long "long long" float double "long double" size_t ssize_t)
  string(TOUPPER "${_t}" _T)
  string(REPLACE " " "_" _T "${_T}")
  _iostack_type_size("${_t}" EC_SIZEOF_${_T})
endforeach()
if(NOT DEFINED EC_SIZEOF_PTR)
  set(EC_SIZEOF_PTR "${CMAKE_SIZEOF_VOID_P}" CACHE INTERNAL "sizeof(void*)")
endif()
list(APPEND IOSTACK_PRESEED_VARS EC_SIZEOF_PTR)

# -- byte order ----------------------------------------------------------------
# ecbuild derives EC_BIG/LITTLE_ENDIAN at compile time and sets them as
# normal variables, which shadow these cache entries; cached here so a
# pre-seed file states the target's byte order for readers and old ecbuild.
if(NOT DEFINED EC_BIG_ENDIAN OR NOT DEFINED EC_LITTLE_ENDIAN)
  message(FATAL_ERROR "iostack probe: ecbuild did not set EC_BIG_ENDIAN/EC_LITTLE_ENDIAN")
endif()
set(EC_BIG_ENDIAN "${EC_BIG_ENDIAN}" CACHE INTERNAL "target is big endian")
set(EC_LITTLE_ENDIAN "${EC_LITTLE_ENDIAN}" CACHE INTERNAL "target is little endian")
list(APPEND IOSTACK_PRESEED_VARS EC_BIG_ENDIAN EC_LITTLE_ENDIAN)

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
list(APPEND IOSTACK_PRESEED_VARS EC_HAVE_PROCFS EC_ATTRIBUTE_CONSTRUCTOR_INITS_ARGV)

ecbuild_check_c_source_return("
#include <float.h>
#include <stdio.h>
int main(void) { printf(\"%d\", LDBL_MANT_DIG); return 0; }"
  VAR IOSTACK_HAVE_LDBL_MANT_DIG OUTPUT IOSTACK_LDBL_MANT_DIG)
_iostack_require_ran(IOSTACK_HAVE_LDBL_MANT_DIG)
list(APPEND IOSTACK_PRESEED_VARS IOSTACK_HAVE_LDBL_MANT_DIG IOSTACK_LDBL_MANT_DIG)

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
  list(APPEND IOSTACK_PRESEED_VARS IEEE_${_order})
endforeach()

# -- Fortran -------------------------------------------------------------------
ecbuild_check_fortran_source_return("
program ldbl
  use, intrinsic :: iso_c_binding, only : c_long_double
  implicit none
  real(c_long_double) :: x
  x = 1
  write(*, '(i0)', advance='no') precision(x)
end program ldbl"
  VAR IOSTACK_HAVE_Fortran_LDBL_PRECISION OUTPUT IOSTACK_Fortran_LDBL_PRECISION)
_iostack_require_ran(IOSTACK_HAVE_Fortran_LDBL_PRECISION)
list(APPEND IOSTACK_PRESEED_VARS IOSTACK_HAVE_Fortran_LDBL_PRECISION IOSTACK_Fortran_LDBL_PRECISION)

# All of ecbuild 3.7's Fortran feature checks.
set(IOSTACK_Fortran_FEATURES c_size_t c_sizeof derivedtype_interface derivedtype_io finalization submodules)
ecbuild_check_fortran(FEATURES ${IOSTACK_Fortran_FEATURES})
foreach(_f ${IOSTACK_Fortran_FEATURES})
  string(TOUPPER "${_f}" _F)
  list(APPEND IOSTACK_PRESEED_VARS HAS_Fortran_${_F})
endforeach()

unset(_t)
unset(_T)
unset(_f)
unset(_F)
unset(_order)
unset(_little)
