"""The stack cross-built for aarch64 with toolchains/aarch64-linux-gnu.cmake ([OIFS-HECToR]'s
toolchain file, proven on the real code).

In one job: ecbuild, eckit, metkit and FDB (the versions the recipes pin, from the Spack
source mirror) are built natively and for aarch64 (toolchain file and pre-seed file; the
target's ecCodes from Debian's arm64 packages); the aarch64 fdb-write and fdb-read archive
and retrieve gribgen's field set under qemu-aarch64, the native ones natively, and every
retrieved field is compared per message with the input and with the other build's
(toolchains/fdb_roundtrip.py). A negative control flips one bit of one retrieved field,
and FDB configured without the toolchain file shows the failure the file prevents.
The build steps' wall times are the performance variables (informational: no reference).

Runs where a partition has the `cross-aarch64` feature (aarch64 cross compilers, qemu-user,
dpkg architecture arm64: system-packages.toml, nightly) and an environment has ecCodes' tools (`grib`).
IOSTACK_SOURCE_MIRROR names the mirror (default: the one set-up registered);
IOSTACK_NATIVE_FDB_PREFIX, if set, is compared too (e.g. the Spack-built FDB).
"""
import sys

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import performance_function, run_before, sanity_function, variable

from iostack.core import paths
from iostack_rfm.base import IostackMixin

TOOLCHAINS = paths.REPO / 'toolchains'
# gribgen's field set: t/u/v/z on the first levels, 2t/msl, every 6 h
PL_PARAMS = '130/131/132/129'
SFC_PARAMS = '167/151'
LEVELS = (1000, 850, 700, 500, 250, 100)
MARS_BASE = 'class=od,expver=0001,stream=oper,date=20240101,time=0000,domain=g,type=fc'
# qemu as the toolchain's CMAKE_CROSSCOMPILING_EMULATOR runs it: the cross root's loader
# with that root's libc, not Debian's libc6:arm64 (another glibc build)
QEMU = 'qemu-aarch64 -L /usr/aarch64-linux-gnu -E LD_LIBRARY_PATH=/usr/aarch64-linux-gnu/lib'


@rfm.simple_test
class CrossAarch64StackCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = 'eckit, metkit, FDB cross-built for aarch64 run under qemu: fields bit-identical to native'
    valid_systems = ['+cross-aarch64']
    valid_prog_environs = ['+grib']
    nsteps = variable(int, value=3)
    nlevels = variable(int, value=3)
    time_limit = '3h'
    tags = {'nightly', 'toolchains', 'cross'}
    maintainers = ['iostack']

    @property
    def expected_messages(self):
        return self.nsteps * (4 * self.nlevels + 2)

    @run_before('run')
    def set_job(self):
        steps = '/'.join(str(6 * s) for s in range(self.nsteps))
        levels = '/'.join(map(str, LEVELS[:self.nlevels]))
        request = (f'retrieve,{MARS_BASE},levtype=pl,levelist={levels},param={PL_PARAMS},step={steps}\n'
                   f'retrieve,{MARS_BASE},levtype=sfc,param={SFC_PARAMS},step={steps}')
        # ReFrame's own Python: build_stack.py fetches a wheel with its pip
        python = sys.executable
        build = f'{python} {TOOLCHAINS}/build_stack.py'
        self.prerun_cmds = [
            f'{build} --work native --prefix native/prefix > native.out 2>&1; echo "native rc=$?"',
            f'overlay=$({TOOLCHAINS}/debian-dev-overlay.sh overlay)',
            f'{build} --work aarch64 --prefix aarch64/prefix --toolchain {TOOLCHAINS}/aarch64-linux-gnu.cmake '
            f'--preseed {TOOLCHAINS}/preseed/aarch64-linux-gnu.cmake --prefix-path "$overlay" '
            '> aarch64.out 2>&1; echo "aarch64 rc=$?"',
            # [OIFS-HECToR]'s failure, today's form: FDB configured with the aarch64 compilers but
            # without the toolchain file takes itself for native and cannot compile its GRIB code
            'cmake -S aarch64/work/src/fdb-* -B fdb-bare -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc '
            '-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ "-DCMAKE_PREFIX_PATH=$PWD/aarch64/prefix;$overlay" '
            '-DENABLE_TESTS=OFF > fdb-bare.out 2>&1',
            'make -C fdb-bare/src/fdb5 io/SingleGribMungePartFileHandle.cc.o >> fdb-bare.out 2>&1; '
            'echo "fdb bare object rc=$?"',
            f'python3 -m iostack_rfm.jobs.gribgen input.grib {self.nsteps} {self.nlevels}',
            f"printf '%s\\n' '{request}' > retrieve.req",
        ]
        self.executable = python
        self.executable_opts = [
            f'{TOOLCHAINS}/fdb_roundtrip.py', '--work', 'roundtrip', '--input', 'input.grib',
            '--request', 'retrieve.req', '--expect', str(self.expected_messages),
            '--build', 'native=native/prefix',
            '--build', f"'aarch64=aarch64/prefix@{QEMU}'",
            # another native FDB of the same version, e.g. the Spack-built one
            '${IOSTACK_NATIVE_FDB_PREFIX:+--build spack=$IOSTACK_NATIVE_FDB_PREFIX}',
            '> roundtrip.out',
        ]
        self.postrun_cmds = [
            'cp roundtrip/aarch64/retrieved.grib flipped.grib',
            'python3 -m iostack_rfm.jobs.gribcompare flip-bit flipped.grib --message 5',
            'python3 -m iostack_rfm.jobs.gribcompare compare input.grib flipped.grib '
            f'--expect {self.expected_messages} > flipped.out; echo "flipped compare rc=$?"',
        ]

    @sanity_function
    def validate(self):
        n = self.expected_messages
        return sn.all([
            sn.assert_found(r'native rc=0', self.stdout),
            sn.assert_found(r'aarch64 rc=0', self.stdout),
            sn.assert_found(r'processor +: \[x86_64\]', 'fdb-bare.out'),
            sn.assert_found(r'fatal error: eccodes\.h: No such file or directory', 'fdb-bare.out'),
            sn.assert_found(r'fdb bare object rc=[1-9]', self.stdout),
            sn.assert_found(rf'gribgen: messages={n} ', self.stdout),
            sn.assert_found(r'build=aarch64 tool=fdb-write machine=aarch64', 'roundtrip.out'),
            sn.assert_found(r'build=native tool=fdb-write machine=x86_64', 'roundtrip.out'),
            sn.assert_found(r'build=aarch64 fdb-write rc=0 fdb-read rc=0', 'roundtrip.out'),
            # input vs native, input vs aarch64, native vs aarch64: every field identical
            sn.assert_eq(sn.count(sn.extractall(rf'matched={n} missing=0 extra=0 identical={n} differing=0',
                                                'roundtrip.out')),
                         sn.count(sn.extractall(r'roundtrip: compare ', 'roundtrip.out'))),
            sn.assert_found(r'roundtrip: comparisons=\d+ identical=\d+ RESULT=IDENTICAL', 'roundtrip.out'),
            # the negative control: the comparison sees one flipped bit
            sn.assert_found(rf'identical={n - 1} differing=1', 'flipped.out'),
            sn.assert_found(r'flipped compare rc=1', self.stdout),
        ])

    def _seconds(self, build, package, step):
        return sn.extractsingle(rf'build_stack: {package} {step} seconds=(\S+)', f'{build}.out', 1, float)

    @performance_function('s')
    def native_eckit_build(self):
        return self._seconds('native', 'eckit', 'build')

    @performance_function('s')
    def aarch64_eckit_build(self):
        return self._seconds('aarch64', 'eckit', 'build')

    @performance_function('s')
    def native_total(self):
        return sn.extractsingle(r'build_stack: all total seconds=(\S+)', 'native.out', 1, float)

    @performance_function('s')
    def aarch64_total(self):
        return sn.extractsingle(r'build_stack: all total seconds=(\S+)', 'aarch64.out', 1, float)
