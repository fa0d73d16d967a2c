# Shared by the iostack toolchain files: "Bit" build-type flags and OpenMP
# settings for one compiler family. Set IOSTACK_COMPILER_FAMILY before
# including: GNU (gcc/g++/gfortran, also PrgEnv-gnu behind cc/CC/ftn) or
# CCE (HPE Cray CCE >= 9: Clang-based cc/CC, classic Cray ftn).
#
# Every value below can be overridden per build with -D<name>=..., e.g.
# -DIOSTACK_Fortran_FLAGS_BIT="...".

if(IOSTACK_COMPILER_FAMILY STREQUAL "CCE")
  # cc/CC are Clang-based since CCE 9, so the classic -h options do not
  # apply to them; stopping FMA contraction is the Clang-side equivalent.
  set(_iostack_bit_C       "-O2 -ffp-contract=off -DNDEBUG")
  set(_iostack_bit_CXX     "-O2 -ffp-contract=off -DNDEBUG")
  # ftn: -hfp1 forbids reciprocal rewrites of divisions, flex_mp=conservative
  # keeps results independent of rank/thread counts, add_paren evaluates
  # + - * left to right.
  set(_iostack_bit_Fortran "-O2 -hfp1 -hflex_mp=conservative -hadd_paren -DNDEBUG")
  set(_iostack_omp_C       "-fopenmp")
  set(_iostack_omp_CXX     "-fopenmp")
  # ftn has OpenMP off by default since CCE 9; FindOpenMP would accept an
  # empty flag for compiler id "Cray" and silently build without OpenMP.
  set(_iostack_omp_Fortran "-homp")
elseif(IOSTACK_COMPILER_FAMILY STREQUAL "GNU")
  # GCC contracts a*b+c into FMA by default wherever the target has FMA
  # (all aarch64, x86_64 with -march=znver*), which changes results between
  # machines and vectorisation choices.
  set(_iostack_bit_C       "-O2 -ffp-contract=off -DNDEBUG")
  set(_iostack_bit_CXX     "-O2 -ffp-contract=off -DNDEBUG")
  # -fno-range-check -fconvert=big-endian: kept from ecbuild's own GNU "Bit"
  # so unformatted files stay readable by ecbuild-default Bit builds.
  set(_iostack_bit_Fortran "-O2 -ffp-contract=off -fno-range-check -fconvert=big-endian -DNDEBUG")
  set(_iostack_omp_C       "-fopenmp")
  set(_iostack_omp_CXX     "-fopenmp")
  set(_iostack_omp_Fortran "-fopenmp")
else()
  message(FATAL_ERROR "iostack toolchain: IOSTACK_COMPILER_FAMILY must be GNU or CCE, got '${IOSTACK_COMPILER_FAMILY}'")
endif()

foreach(_lang C CXX Fortran)
  set(IOSTACK_${_lang}_FLAGS_BIT "${_iostack_bit_${_lang}}" CACHE STRING
      "${_lang} flags of the Bit (reproducibility) build type, iostack toolchain")
  # Plain CMake projects read CMAKE_<LANG>_FLAGS_BIT. ecbuild overwrites that
  # cache entry with its own per-compiler defaults, and applies
  # ECBUILD_<LANG>_FLAGS_BIT after it, so set both (not cached: ecbuild's
  # FORCE would otherwise win on re-configure).
  set(CMAKE_${_lang}_FLAGS_BIT "${IOSTACK_${_lang}_FLAGS_BIT}")
  set(ECBUILD_${_lang}_FLAGS_BIT "${IOSTACK_${_lang}_FLAGS_BIT}")

  # ecbuild_find_omp() uses OMP_<LANG>_FLAGS when set and skips its probe.
  if(NOT DEFINED OMP_${_lang}_FLAGS)
    set(OMP_${_lang}_FLAGS "${_iostack_omp_${_lang}}")
  endif()

  # FindOpenMP: with flags and library names given it compiles nothing.
  # CMake puts OpenMP_<LANG>_FLAGS on compile lines only (CMake issue 26129),
  # but the Cray drivers (and gcc) pick the OpenMP runtime only when the flag
  # is on the link line too; FindOpenMP passes OpenMP_<name>_LIBRARY to the
  # link line verbatim and CMake treats an item starting with '-' as a link
  # flag, so the flag itself is the "library".
  if(NOT DEFINED OpenMP_${_lang}_FLAGS)
    string(MAKE_C_IDENTIFIER "iostack_omp${_iostack_omp_${_lang}}" _iostack_omp_name)
    set(OpenMP_${_lang}_FLAGS "${_iostack_omp_${_lang}}")
    set(OpenMP_${_lang}_LIB_NAMES "${_iostack_omp_name}")
    set(OpenMP_${_iostack_omp_name}_LIBRARY "${_iostack_omp_${_lang}}")
  endif()
endforeach()
# Both gfortran and CCE ftn ship the omp_lib module and omp_lib.h.
if(NOT DEFINED OpenMP_Fortran_HAVE_OMPLIB_MODULE)
  set(OpenMP_Fortran_HAVE_OMPLIB_MODULE TRUE)
  set(OpenMP_Fortran_HAVE_OMPLIB_HEADER TRUE)
endif()

unset(_lang)
unset(_iostack_omp_name)
