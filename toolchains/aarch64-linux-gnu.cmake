# iostack toolchain: cross-compile for aarch64 Linux (OCI Ampere A1 nodes,
# Ampere Altra = Arm Neoverse N1) from an x86_64 build host with the GNU
# cross compilers (Debian/Ubuntu: gcc-aarch64-linux-gnu, g++-..., gfortran-...).
#
#   cmake   -DCMAKE_TOOLCHAIN_FILE=<iostack>/toolchains/aarch64-linux-gnu.cmake \
#           -C <iostack>/toolchains/preseed/aarch64-linux-gnu.cmake ...
#   ecbuild --toolchain=<iostack>/toolchains/aarch64-linux-gnu.cmake \
#           -C <iostack>/toolchains/preseed/aarch64-linux-gnu.cmake ...
#
# Plain CMake try_run()/check_*_source_runs() execute through qemu-aarch64
# (CMAKE_CROSSCOMPILING_EMULATOR). ecbuild's own run checks do not use the
# emulator (ecbuild_try_run calls execute_process directly), so ecbuild
# projects still need the -C pre-seed file. See README.md.
#
# Knobs (cache variables, set with -D):
#   IOSTACK_AARCH64_PREFIX    compiler prefix        (aarch64-linux-gnu-)
#   IOSTACK_AARCH64_SYSROOT   target libraries root  (/usr/aarch64-linux-gnu)
#   IOSTACK_AARCH64_CPU       -mcpu value, empty = compiler default (neoverse-n1)
#   IOSTACK_AARCH64_MULTIARCH also search /usr/lib/aarch64-linux-gnu (ON if it exists)
#   IOSTACK_USE_EMULATOR      run try_run programs under qemu (ON)

# CMAKE_SYSTEM_NAME set here is what makes CMake cross-compile
# (CMAKE_CROSSCOMPILING TRUE): try_run no longer executes target code natively.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(IOSTACK_AARCH64_PREFIX "aarch64-linux-gnu-" CACHE STRING "Prefix of the aarch64 cross compilers")
set(IOSTACK_AARCH64_SYSROOT "/usr/aarch64-linux-gnu" CACHE PATH "Root of the aarch64 target libraries")
set(IOSTACK_AARCH64_CPU "neoverse-n1" CACHE STRING "-mcpu= for the target (empty: compiler default)")
option(IOSTACK_USE_EMULATOR "Run plain CMake try_run programs under qemu-aarch64" ON)

set(CMAKE_C_COMPILER       "${IOSTACK_AARCH64_PREFIX}gcc")
set(CMAKE_CXX_COMPILER     "${IOSTACK_AARCH64_PREFIX}g++")
set(CMAKE_Fortran_COMPILER "${IOSTACK_AARCH64_PREFIX}gfortran")

# Libraries, headers and CMake packages come only from the target: the cross
# root, and on Debian/Ubuntu the multiarch tree, where apt installs the target's
# packages (libfoo-dev:arm64 in /usr/lib/aarch64-linux-gnu). CMake looks there
# under lib/<CMAKE_LIBRARY_ARCHITECTURE> (aarch64-linux-gnu, from the compiler),
# never in the host's lib/x86_64-linux-gnu, so the host's x86_64 eckit/eccodes
# packages are not picked up. Programs come from the host. ecbuild (host-side,
# architecture-independent) is unaffected: ecbuild projects find it before
# project(), when this file is not yet in effect.
if(EXISTS "/usr/lib/aarch64-linux-gnu")
  set(_iostack_multiarch ON)
else()
  set(_iostack_multiarch OFF)
endif()
option(IOSTACK_AARCH64_MULTIARCH "Search the Debian multiarch target packages (/usr/lib/aarch64-linux-gnu)"
       ${_iostack_multiarch})
set(CMAKE_FIND_ROOT_PATH "${IOSTACK_AARCH64_SYSROOT}")
if(IOSTACK_AARCH64_MULTIARCH)
  # "/" as a root: prefixes (CMAKE_PREFIX_PATH, the install prefix) stay as given.
  list(APPEND CMAKE_FIND_ROOT_PATH "/")
endif()
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Debian puts a multiarch package's architecture-specific headers (eccodes.h)
# in <prefix>/include/aarch64-linux-gnu, which the native compiler searches and
# the cross compiler does not; -idirafter keeps the cross libc's headers first.
if(IOSTACK_AARCH64_MULTIARCH)
  set(_iostack_includes /usr/include/aarch64-linux-gnu)
  foreach(_prefix IN LISTS CMAKE_PREFIX_PATH)
    if(IS_DIRECTORY "${_prefix}/include/aarch64-linux-gnu")
      list(APPEND _iostack_includes "${_prefix}/include/aarch64-linux-gnu")
    endif()
  endforeach()
  foreach(_lang C CXX Fortran)
    foreach(_dir IN LISTS _iostack_includes)
      string(FIND "${CMAKE_${_lang}_FLAGS_INIT}" " -idirafter ${_dir}" _seen)
      if(_seen EQUAL -1)
        string(APPEND CMAKE_${_lang}_FLAGS_INIT " -idirafter ${_dir}")
      endif()
    endforeach()
  endforeach()
endif()
# pkg-config (FindCURL, FindPkgConfig users) must describe the target too: the
# host's .pc files would hand out x86_64 library directories.
set(ENV{PKG_CONFIG_LIBDIR}
    "${IOSTACK_AARCH64_SYSROOT}/lib/pkgconfig:/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")

# FindMPI asks the MPI compiler wrapper (mpicc -show) for its include and
# library directories: on this host that is the host's x86_64 Open MPI. With
# the cross compilers as "wrappers", FindMPI looks for the target's MPI
# libraries instead (-DMPI_<LANG>_COMPILER=... for a real aarch64 wrapper).
foreach(_lang C CXX Fortran)
  set(MPI_${_lang}_COMPILER "${CMAKE_${_lang}_COMPILER}" CACHE FILEPATH "MPI compiler for ${_lang} (target)")
endforeach()

# ecbuild's Fortran feature checks test CROSS_COMPILING, not
# CMAKE_CROSSCOMPILING: without this they run aarch64 binaries on the host.
set(CROSS_COMPILING ON)

# CMake reads a toolchain file more than once per configure: append once.
if(IOSTACK_AARCH64_CPU)
  foreach(_lang C CXX Fortran)
    if(NOT CMAKE_${_lang}_FLAGS_INIT MATCHES "-mcpu=")
      string(APPEND CMAKE_${_lang}_FLAGS_INIT " -mcpu=${IOSTACK_AARCH64_CPU}")
    endif()
  endforeach()
endif()

if(IOSTACK_USE_EMULATOR)
  find_program(IOSTACK_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
  if(IOSTACK_QEMU_AARCH64)
    # -L: where qemu finds the target's dynamic loader and shared libraries.
    # LD_LIBRARY_PATH: that root's libc too. The loader searches the multiarch
    # /lib/aarch64-linux-gnu first, where Debian's libc6:arm64 is another glibc
    # build than the root's ld.so; mixed, programs crash or hang (fdb-read did).
    set(CMAKE_CROSSCOMPILING_EMULATOR
        "${IOSTACK_QEMU_AARCH64};-L;${IOSTACK_AARCH64_SYSROOT};-E;LD_LIBRARY_PATH=${IOSTACK_AARCH64_SYSROOT}/lib")
  endif()
endif()

# Reproducibility build type used by ecbuild projects ("Bit") and plain CMake
# projects configured with -DCMAKE_BUILD_TYPE=Bit.
set(IOSTACK_COMPILER_FAMILY GNU)
include("${CMAKE_CURRENT_LIST_DIR}/include/compiler-flags.cmake")
