# iostack toolchain: HPE Cray EX, PrgEnv-gnu: cc/CC/ftn by hand, the PE's gcc under Spack.
#
#   module load cpe/23.09 PrgEnv-gnu craype-x86-rome    # release, PrgEnv, zen2 target
#   ecbuild --toolchain=<iostack>/toolchains/cray-gnu.cmake \
#           -C <iostack>/toolchains/preseed/cray-ex-zen2.cmake \
#           -DCMAKE_INSTALL_PREFIX=<prefix> --build=Bit <src>
#
# Link/RPATH policy and cross-compile setup: include/cray-common.cmake.
# Bit and OpenMP flags: include/compiler-flags.cmake. See README.md.
set(IOSTACK_CRAY_PE_ENV GNU)
set(IOSTACK_COMPILER_FAMILY GNU)
include("${CMAKE_CURRENT_LIST_DIR}/include/cray-common.cmake")
