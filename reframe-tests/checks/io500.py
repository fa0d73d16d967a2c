"""IO500 ([IO500-OFP]): IOR easy/hard write and read, mdtest easy/hard create, stat, read and
delete, and find, on the partition's I/O file system, scored
sqrt(geomean(4 bandwidths, GiB/s) x geomean(8 metadata rates, kIOPS)).

The ini comes from the parameters (iostack_rfm.parsers.io500): data directory from the
partition's io_dir (the stage directory where that is node-local NVMe, since io500 reads
back files other nodes wrote), the stonewall time and sizes that let each phase last that
long. Sanity: every one of the 12 scored phases printed its [RESULT], the score io500 prints
is recomputed from them (within the printed rounding, iostack_rfm/parsers/io500.py), and a run with the
rules' 300-s stonewall must come out valid. Performance: the score, its two geometric means
and every phase, each the median of `repeats` runs of io500 in the job (3 for the CI-sized
nightly, whose 5-s phases are noisy; 1 elsewhere), with the score's spread beside it.

[IO500-OFP]'s Oakforest-PACS scores (Lustre, Table 3; IME burst buffer, Table 4) are in
references/io500.yaml under documented pseudo-systems, with the seed's marks of runs that
did not last 5 minutes; they gate nothing here.

IOR/io500 are not Debian packages: this check runs where the stack has an io500 module
(environment feature `io500`). On a CI-sized node (`+small-io`) it runs one node's ranks with
a 5-s stonewall and sizes a few hundred MiB on the node's disk: every phase still runs and
the score is still recomputed and cross-checked, but it is a health check, not a listable
result.
"""
from typing import Any

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

from iostack_rfm.parsers import io500
from iostack_rfm.base import AppCheck, median, parsed, spread


SMALL_NODE_STONEWALL = 5
# Per rank, so that a 2-core node's two ranks write a few hundred MiB in all: IOR easy's
# block, IOR hard's 47,008-byte segments, mdtest's files.
SMALL_NODE_SIZES: dict[str, Any] = dict(ior_easy_block='128m', ior_hard_segments=2000,
                                        mdtest_easy_files=5000, mdtest_hard_files=2000)


@rfm.simple_test
class IO500Check(AppCheck):
    descr = 'IO500: 12 phases, score recomputed and cross-checked ([IO500-OFP])'
    app_features = ['io500']
    nodes = parameter([1, 4])
    one_rank_per_core = True
    #: seconds; 300 is the rules' (a listable run), 30 a nightly health check on a cluster,
    #: 5 the same on a CI-sized node's disk
    stonewall = parameter([SMALL_NODE_STONEWALL, 30, io500.RULES_STONEWALL_SECONDS])
    time_limit = '2h'
    #: io500 runs in the job (default: 3 with the CI-sized stonewall, else 1)
    repeats = variable(int, type(None), value=None)

    @run_after('init')
    def set_tags_and_phases(self):
        small = self.stonewall == SMALL_NODE_STONEWALL
        self.skip_if(small and self.nodes != 1, 'a CI-sized node runs one node only')
        self.valid_systems = ['+mpi +small-io'] if small else ['+mpi -small-io']
        if self.repeats is None:
            self.repeats = 3 if small else 1
        if small:
            self.time_limit = '10m' if self.repeats == 1 else '30m'
        self.tags = {'io500', 'io', 'performance', 'weekly'}
        if self.stonewall < io500.RULES_STONEWALL_SECONDS and self.nodes == 1:
            self.tags.add('nightly')
        scores = {'score': ('total', 'score'), 'bandwidth': ('bandwidth', io500.BANDWIDTH),
                  'metadata': ('metadata', io500.METADATA)}
        self.perf_variables = {
            name: sn.make_performance_function(
                median(*(parsed(io500.score_value, out, which=which) for out in self.outputs)),
                unit)
            for name, (which, unit) in scores.items()}
        self.perf_variables['score_spread'] = sn.make_performance_function(
            spread(*(parsed(io500.score_value, out, which='total') for out in self.outputs)),
            'fraction')
        for phase in io500.PHASES:
            unit = io500.BANDWIDTH if phase in io500.STANDARD_BANDWIDTH_PHASES else io500.METADATA
            self.perf_variables[phase.replace('-', '_')] = sn.make_performance_function(
                median(*(parsed(io500.phase_value, out, name=phase) for out in self.outputs)),
                unit)

    @property
    def outputs(self):
        """io500's output of each run in the job."""
        return [f'io500-{i}.out' for i in range(1, self.repeats + 1)]

    @run_before('run')
    def set_job(self):
        data = f'{self.shared_io_dir()}/io500-data'
        sizes = SMALL_NODE_SIZES if self.stonewall == SMALL_NODE_STONEWALL else {}
        config = io500.IO500Config(datadir=data, stonewall_seconds=self.stonewall, **sizes)
        self.prerun_cmds = [f"cat > io500.ini <<'INI'\n{config.render()}\nINI"]
        for i, out in enumerate(self.outputs, 1):
            self.prerun_cmds += [
                self.step(f'prepare-{i}', f'rm -rf {data} && mkdir -p {data}'),
                self.step(f'io500-{i}', f'{self.mpi_command()} io500 io500.ini > {out} '
                          f'2> io500-{i}.err'),
            ]
        self.prerun_cmds.append(self.step('cleanup', f'rm -rf {data}'))
        self.executable = 'cat'
        self.executable_opts = self.outputs

    @sanity_function
    def validate(self):
        runs = range(1, self.repeats + 1)
        checks = [self.steps_ok([*(f'{s}-{i}' for i in runs for s in ('prepare', 'io500')),
                                 'cleanup'])]
        for out in self.outputs:
            checks.append(sn.assert_eq(parsed(io500.score_problems, out), [],
                                       msg=f'{out}: io500 score: {{0}}'))
            if self.stonewall >= io500.RULES_STONEWALL_SECONDS:
                checks.append(sn.assert_eq(parsed(io500.invalid_parts, out), [],
                                           msg=f'{out}: invalid under the rules: {{0}}'))
        return sn.all(checks)
