"""Work counts per field of the programs the nightly times, gated every night (issue 38).

The job runs `bin/iostack counts check` on the release under test: every workload of
iostack.regression.counts (FDB archive, retrieve, GRIB encode and decode, NetCDF and
PnetCDF writes, IOR, mdtest, nvme-stage, MultIO into FDB; OpenIFS's time steps where the
release has OpenIFS), counted by callgrind inside the timed region and by strace, against
the committed references of this build
(reframe-tests/references/counts/<site>-<hash>.yaml).
A count is the same on every run and every node, so the band is the reference's own
(at most 1%: a 2% increase always fails) and one night decides, with no retry or
confirmation: sanity fails on any count that moved, and its line names the count, the
change and the functions that grew.

Every workload's instructions, system calls, bytes written and syncs per field are
performance variables too, with no reference: the results DB keeps their history beside the
times, and the report shows them. A build with no references fails with the command that
records them (a check that could not run never passes).
"""
import json
import os
import re

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from iostack.core import paths
from iostack_rfm import context
from iostack_rfm.base import IostackMixin

#: what each workload reports (its counts per field; system calls by name stay in the JSON)
SHOWN = ('instructions', 'syscalls', 'bytes written', 'syncs')
#: the workloads of iostack.regression.counts.WORKLOADS that every site's stack can run
WORKLOADS = ('fdb-archive-key', 'fdb-archive-message', 'fdb-retrieve', 'grib-encode',
             'grib-decode', 'netcdf-serial', 'netcdf-c-combined', 'pnetcdf-combined',
             'pnetcdf-batching', 'ior-posix', 'mdtest-files', 'nvme-stage-in', 'multio-fdb')
#: and those only a release with OpenIFS can (OpenifsWorkCountsCheck)
OPENIFS_WORKLOADS = ('openifs-step',)
#: counted by their system calls and bytes only: their time is the file system's
NO_INSTRUCTIONS = ('ior-posix', 'mdtest-files', 'nvme-stage-in')
OUTPUT = 'counts.json'


@sn.deferrable
def _from_json(workload, count):
    with open(OUTPUT) as f:
        return float(json.load(f)['workloads'][workload]['counts'].get(count, 0.0))


@sn.deferrable
def _no_moves():
    """True, or the failure that names every count that moved."""
    with open(OUTPUT) as f:
        lines = [m['line'] for m in json.load(f)['moves']]
    if lines:
        raise SanityError(f'{len(lines)} work count(s) moved: ' + '; '.join(lines))
    return True


@rfm.simple_test
class WorkCountsCheck(IostackMixin, rfm.RunOnlyRegressionTest):
    descr = 'work counts per field (instructions, system calls, bytes, syncs) against the build\'s references'
    valid_systems = ['+fdb']
    valid_prog_environs = ['builtin']
    num_tasks = 1
    tags = {'counts', 'nightly'}
    # callgrind runs each workload at two sizes, strace once more: minutes on a 2-core node
    time_limit = '30m'
    keep_files = [OUTPUT]
    #: the workloads counted: all by default; `-S WorkCountsCheck.workloads=a,b` for a night
    #: of fewer (an unknown name fails the job, naming the known ones)
    workloads = variable(typ.List[str], value=list(WORKLOADS))

    @run_before('run')
    def set_job(self):
        tree = context.release() or context.root()
        root = context.root() or tree
        site = context.site_of(self.current_partition)
        opts = ['counts', 'check', '--site', site, '--root', str(root), '--json', OUTPUT]
        if sorted(self.workloads) != sorted(WORKLOADS):
            # else the command counts what the references hold, every one of them
            for workload in self.workloads:
                opts += ['--workload', workload]
        if tree and tree.parent.name == 'releases':
            opts += ['--release', tree.name]
        self.executable = os.fspath(paths.REPO / 'bin' / 'iostack')
        self.executable_opts = opts

    @sanity_function
    def validate(self):
        # the command's verdict, and the JSON it wrote beside it
        return sn.all([
            _no_moves(),
            sn.assert_found(r'work counts within their bands', self.stdout),
            # a summary line per workload: every one ran
            *(sn.assert_found(rf'^{re.escape(w)}: ', self.stdout) for w in self.workloads),
        ])

    @run_after('init')
    def set_perf_variables(self):
        for workload in self.workloads:
            for count in SHOWN:
                if count == 'instructions' and workload in NO_INSTRUCTIONS:
                    continue
                self.perf_variables[f'{workload} {count}'] = sn.make_performance_function(
                    _from_json(workload, count), 'per field')


@rfm.simple_test
class OpenifsWorkCountsCheck(WorkCountsCheck):
    """OpenIFS's step loop, counted where the release has OpenIFS (local's `nwp`
    environment): its instructions and system calls per time step against the same
    references (counts workload `openifs-step`)."""
    descr = 'work counts per time step of OpenIFS (Held-Suarez T21L19, no output) against the build\'s references'
    valid_prog_environs = ['+openifs']
    tags = {'counts', 'openifs', 'nightly'}
    workloads = list(OPENIFS_WORKLOADS)
