# iostack toolchain: HPE Cray EX, PrgEnv-cray (CCE): cc/CC/ftn by hand, CCE itself under Spack.
#
#   module load cpe/23.09 PrgEnv-cray craype-x86-rome   # release, PrgEnv, zen2 target
#   ecbuild --toolchain=<iostack>/toolchains/cray-cce.cmake \
#           -C <iostack>/toolchains/preseed/cray-ex-zen2.cmake \
#           -DCMAKE_INSTALL_PREFIX=<prefix> --build=Bit <src>
#
# CCE >= 9: cc/CC are Clang-based (OpenMP -fopenmp), ftn is the classic
# Cray Fortran compiler (OpenMP -homp, off by default).
# Link/RPATH policy and cross-compile setup: include/cray-common.cmake.
# Bit and OpenMP flags: include/compiler-flags.cmake. See README.md.
set(IOSTACK_CRAY_PE_ENV CRAY)
set(IOSTACK_COMPILER_FAMILY CCE)
include("${CMAKE_CURRENT_LIST_DIR}/include/cray-common.cmake")
