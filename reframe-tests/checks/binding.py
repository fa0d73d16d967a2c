"""Every rank and OpenMP thread of a job runs where the site's node layout says: on the
cores and NUMA domains that NPS/SMT and the site's srun options give it ([ARCHER2-Scheduler]:
one task per core, --hint=nomultithread, ranks in blocks, --distribution=block:block).

A probe (src/binding/binding_probe.c, C with OpenMP and hwloc) reads, in every rank, the
CPUs /proc/self/status gives it and the binding hwloc reads, then the same for each of its
OpenMP threads (OMP_PLACES=cores, OMP_PROC_BIND=close), and from one rank per node the
node's topology as hwloc sees it. iostack_rfm.parsers.binding judges the lines against the
partition's facts (`extras['nps']`, `extras['smt']`, its srun options): one line per
rank or thread out of place, naming the node.

A whole node's cores per job, `threads` threads per rank. `without` leaves srun options of
the partition out (e.g. `-S without=--hint=nomultithread`): the same check then fails,
which is what it is for (tests/integration/test_cluster_binding.py shows both).

    reframe -C reframe-tests/config/local.py --system local-cluster \\
        -c reframe-tests/checks/binding.py -S nodes=2 -r
"""
import os
from typing import Any

import reframe as rfm
import reframe.utility.sanity as sn
import reframe.utility.typecheck as typ
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable

from iostack_rfm.parsers import binding
from iostack_rfm.base import IostackMixin, parsed

SOURCES = os.path.join(os.path.dirname(__file__), '..', 'src', 'binding')


@rfm.simple_test
class BindingCheck(IostackMixin, rfm.RegressionTest):
    descr = "every rank and thread runs on the cores and NUMA domains of the site's NPS/SMT layout"
    valid_systems = ['+binding']
    valid_prog_environs = ['+openmp']
    app_features = ['hwloc']
    tags = {'binding', 'nightly'}
    short_job = True
    sourcesdir = SOURCES
    build_system = 'SingleSource'
    sourcepath = 'binding_probe.c'
    executable = './binding_probe'
    executable_opts = ['--omp-places=cores', '--omp-proc-bind=close']
    time_limit = '10m'
    #: OpenMP threads per rank (the rank's CPUs)
    threads = parameter([1, 2])
    #: nodes of the job
    nodes = variable(int, value=1)
    #: srun options of the partition this run leaves out, to see the check fail without them
    without = variable(typ.List[str], value=[])

    @run_before('compile')
    def flags(self):
        omp = self.current_environ.extras.get('omp_flag', '-fopenmp')
        build: Any = self.build_system      # ReFrame's SingleSource by now
        build.cflags = [omp, '-O1', '$(pkg-config --cflags hwloc 2>/dev/null)']
        build.ldflags = [omp, '$(pkg-config --libs hwloc 2>/dev/null || echo -lhwloc)']

    def layout(self):
        """What the site's facts say this job should find."""
        extras = self.current_partition.extras
        return binding.layout_from_options(
            extras.get('launcher_options', []), nps=extras.get('nps'), smt=extras.get('smt'),
            nodes=self.nodes, tasks_per_node=self.num_tasks_per_node,
            cpus_per_task=self.threads, threads=self.threads)

    @run_after('setup')
    def size_the_job(self):
        extras = self.current_partition.extras
        processor = self.current_partition.processor
        per_core = '--hint=nomultithread' in extras.get('launcher_options', [])
        cpus = processor.num_cpus or 1
        units = cpus // (processor.num_cpus_per_core or 1) if per_core else cpus
        self.skip_if(units < self.threads,
                     f'{units} {"cores" if per_core else "CPUs"} per node, fewer than '
                     f'{self.threads} threads')
        self.num_tasks_per_node = units // self.threads
        self.num_tasks = self.nodes * self.num_tasks_per_node
        self.num_cpus_per_task = self.threads
        self.env_vars['OMP_NUM_THREADS'] = str(self.threads)

    @run_before('run', always_last=True)
    def launch_as_the_site_says(self):
        self.job.launcher.options = [o for o in self.job.launcher.options
                                     if o not in self.without]

    @sanity_function
    def validate(self):
        return sn.assert_eq(parsed(binding.problems, self.stdout, layout=self.layout()), [],
                            msg='{0}')
