"""iostack's ReFrame configuration, built per site (`site_configuration(site)`): the systems of
the site's facts file (sites/<site>.yaml,
read through iostack.site.facts: host names, processors, Slurm partitions, scratch), with the
names of spack-env/sites/ and ansible/inventories/; `local-slurm` is the local site behind a
single-node Slurm.

Checks choose partitions and environments by feature (`valid_systems = ['+fdb']`), never
by name, so a new site runs the suite once its partitions declare their features:
  fdb, grib     FDB5 and ecCodes tools and libraries are there (bit-identity, throughput)
  small-io      a CI-sized node: I/O checks run their small (seconds) variant here and
                their large variant everywhere else
  lustre, nvme  the I/O directory is on Lustre / node-local NVMe
  mpi           MPI jobs can be launched (the partition's launcher starts every rank)
  cpu           CPU partition: the EESSI test-suite selects partitions by it (not by its
                scale features, `1_core`, ..., names ReFrame 4.10 does not accept)
  nps1, nps2, nps4  the nodes' NUMA-per-socket mode [OCI-OpenFOAM]
and environments by `mpi` (MPI compiler wrappers) and `openmp` (extras['omp_flag']), as
ReFrame's tutorial checks select them, by `stack` (the site's Spack stack is usable in
it) and by the
applications and benchmarks the site's stack has:
  openifs, openfoam, ior (IOR and mdtest), io500, netcdf (parallel netCDF-C and PnetCDF),
  nvme-stage, and the stack's own benchmarks
  netcdf-output-bench and fdb-archive-bench (the checks run the release's, never a copy
  they build; Debian has neither, so `builtin` does not offer them)

Partition `extras` the checks read (iostack_rfm.context, iostack_rfm.base):
  site              the site whose facts describe the partition (sites/<site>.yaml)
  io_dir            where I/O checks write (default: the stage directory)
  launcher_options  options every parallel launch of the partition gets (binding)
  mem_per_node      MiB of memory a job may use on a node (the EESSI test-suite's name)
  mpi_launcher_options  options of MPI launches only (PMI selection)
  cpu_freq_khz      the CPU frequency cap performance checks ask for (SLURM_CPU_FREQ_REQ),
                    where the site sets one (the facts' cpu_frequency.performance_khz)
  short_access      sbatch options of a short, small run (the facts' slurm.short: another
                    QoS or partition); checks with `short_job` use them
  large_memory_access  sbatch options of a run needing more memory per node
  node_class        the node class references are keyed by (`<site>.<group>`), where the
                    facts declare the group's CPU model; else each node is its own
                    (iostack.regression.node)
Environment `extras`:
  app_modules       {feature: [modules]} the app checks load for an application
                    feature; none where the application is on PATH (Debian's)

Every partition has a `time_limit`, the bound of a job whose check sets none (a tool
blocked on a full disk must not hold a node; bin/iostack nightly bounds the whole run).

Environment variables (what bin/iostack gives a run: iostack.core.settings.CHILD_VARIABLES,
read by iostack_rfm.context):
  IOSTACK_RFM_STATE    <release>/reframe (set by bin/iostack): reports, perflogs, results DB
  IOSTACK_RELEASE      the release under test: its spack.lock says what the stack holds
  IOSTACK_ACCOUNT      the Slurm account jobs charge (`bin/iostack nightly --account`),
                       instead of the facts' `account.name`
  IOSTACK_RFM_OFFSITE  set to 1 to load this file away from the real sites, e.g. to
                       `--dry-run` cray-ex in CI: their systems then use no modules
                       system (`nomod`) instead of Lmod, since neither the Cray PE nor the
                       sites' module trees exist here. Never set it on a site.
  RFM_SQLITE_DB_FILE   (ReFrame's own) moves the results DB; sqlite needs POSIX locks,
                       which NFS and Lustre do not give reliably: on sites whose root is
                       on such a file system point it at a local disk of the login node.

Each site has its own configuration file, reframe-tests/config/<site>.py, which `bin/iostack
site generate` writes and which only calls `site_configuration`: ReFrame reads one site's
systems, and nothing here holds a copy of a site's facts.
"""
from __future__ import annotations

import dataclasses
import functools
import os
import pathlib
import sys
from collections.abc import Mapping

from reframe.utility.cpuinfo import cpuinfo

# The checks import iostack (the domain code bin/iostack shares) and iostack_rfm: installed
# in the venv by set-up (pyproject.toml), or the checkout's own on the PYTHONPATH that
# `bin/iostack nightly` gives ReFrame (iostack.regression.reframe.environment).
import iostack_rfm.launchers  # noqa: F401  (registers launcher `mpirun-ranks`)
from iostack.core import paths
from iostack.deployment import stack
from iostack.site import facts as site_facts
from iostack.site.target import SpackEnv
from iostack_rfm.parsers import slots

# Environments of the local site (Debian's stack is on PATH; after `bin/iostack deploy`
# the same packages are Lmod modules too).
LOCAL_FEATURES = ['fdb', 'grib', 'small-io', 'local-fs', 'mpi', 'cpu']
# Two jobs share a CI node's 2 cores: Open MPI ranks that spin while they wait starve the
# others (pitzDaily on 2 ranks took 15 s instead of 4 next to one busy process), so they
# yield the core when idle; mpirun starts every rank of a local MPI job
# (iostack_rfm.launchers), as root too (CI).
LOCAL_MPI_ENV = [['OMPI_MCA_mpi_yield_when_idle', '1'], ['OMPI_ALLOW_RUN_AS_ROOT', '1'],
                 ['OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1']]
# Checks iostack did not write (ReFrame's tutorial, the EESSI test-suite, a site's own):
# every MPI partition's launcher starts every rank, MPI environments compile with the MPI
# wrappers, every partition describes its processor.
MPI_ENVIRONMENT = {'cc': 'mpicc', 'cxx': 'mpicxx', 'ftn': 'mpif90'}
MPI_FEATURES = ['mpi', 'openmp']
OPENMP_FLAG = {'omp_flag': '-fopenmp'}
# Applications of the local stack that only some of its environments deploy (spack-env/sites/
# local/: MultIO in every one, OpenIFS in `nwp`): offered by the `stack` environment where
# the deployment's lock has them (the release's, in its regression; else the committed one).
LOCAL_OPTIONAL_APPS = {'multio': ['multio'], 'openifs': ['openifs-env'],
                       # Darshan: its runtime (the checks preload it themselves) and tools
                       'darshan-runtime': ['darshan-runtime', 'darshan-util']}


@dataclasses.dataclass(frozen=True)
class Run:
    """What the configuration reads from the environment of the ReFrame process (what
    bin/iostack gives it: iostack.core.settings.CHILD_VARIABLES), once per build."""
    #: where the run writes (IOSTACK_RFM_STATE; a run by hand: reframe-tests/output)
    state: str
    #: IOSTACK_RFM_OFFSITE: away from the real sites (CI's dry runs), no module system there
    offsite: bool
    #: LMOD_CMD is set: the local systems load modules with it
    lmod: bool
    #: IOSTACK_ACCOUNT: the account jobs charge instead of the facts'
    account: str | None
    #: the lock of the release under test (IOSTACK_RELEASE), None: the committed one
    release_lock: pathlib.Path | None

    @classmethod
    def of(cls, environ: Mapping[str, str]) -> Run:
        state = environ.get('IOSTACK_RFM_STATE') or str(paths.REFRAME_DIR / 'output')
        release = environ.get('IOSTACK_RELEASE')
        lock = pathlib.Path(release) / 'spack.lock' if release else None
        return cls(state=state,
                   offsite=environ.get('IOSTACK_RFM_OFFSITE', '') not in ('', '0'),
                   lmod=bool(environ.get('LMOD_CMD')),
                   account=environ.get('IOSTACK_ACCOUNT') or None,
                   release_lock=lock if lock is not None and lock.is_file() else None)

    @property
    def site_modules(self) -> str:
        return 'nomod' if self.offsite else 'lmod'

    @property
    def local_modules(self) -> str:
        """Jobs load modules only where Lmod is there to do it; without LMOD_CMD the local
        systems run without modules instead of ReFrame stopping with "could not find a sane
        Lmod"."""
        return 'lmod' if self.lmod else 'nomod'

    @property
    def prepare(self) -> list[str]:
        """Jobs are non-login bash scripts: define `module` from the Lmod that ReFrame itself
        uses (LMOD_CMD) so the `module load` lines ReFrame writes work; and every job and
        build on this host shares its slot, which timed checks take to themselves
        (iostack_rfm.parsers.slots)."""
        lmod = ['. "$(dirname "$LMOD_CMD")/../init/bash"'] if self.lmod else []
        return lmod + [slots.share_host(self.state)]

    @property
    def processor(self) -> dict:
        """This node, as ReFrame detects it (local and local-slurm are this node)."""
        return _this_processor()

    @property
    def mem_mib(self) -> int:
        return os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') // 2**20


@functools.cache
def _this_processor() -> dict:
    return cpuinfo()


def _local_stack_apps(run: Run) -> dict[str, list[str]]:
    try:
        roots = {r.name for r in stack.roots_of(SpackEnv('local'), run.release_lock)}
    except (ValueError, KeyError, TypeError):
        # an unreadable lock, or one that is not Spack's: the checks that read it fail to
        # load and are named (the nightly's MODES), rather than the whole configuration
        roots = set()
    return {name: modules for name, modules in LOCAL_OPTIONAL_APPS.items() if name in roots}


def _ucx_env(rdma):
    """The RDMA NIC of the facts as UCX and Open MPI see it: UCX on the cluster-network NIC
    (not the first one it finds), RoCE's traffic class and GID index, and Open MPI's UCX
    PML, so a job that cannot use UCX fails instead of falling back to TCP; as Oracle's stack
    runs MPI on BM.Optimized3.36 [OCI-HPC-Stack]."""
    if not rdma:
        return []
    env = [['UCX_NET_DEVICES', f"{rdma['device']}:{rdma['port']}"], ['OMPI_MCA_pml', 'ucx']]
    if 'traffic_class' in rdma:
        env.append(['UCX_IB_TRAFFIC_CLASS', str(rdma['traffic_class'])])
    if 'gid_index' in rdma:
        env.append(['UCX_IB_GID_INDEX', str(rdma['gid_index'])])
    return env



# The account every job of a Slurm site names (sites/<site>.yaml `account`, or the nightly's
# --account): where the centre requires one and none is given, `bin/iostack nightly` refuses
# in one line before ReFrame starts, so here a partition then just names none.
def _account_access(run: Run, facts):
    try:
        account = facts.slurm_account(run.account)
    except site_facts.FactsError:
        return []
    return [f'--account={account}'] if account else []


def _slurm_partition(run, facts, group, features, **settings):
    """A partition on one node group of a Slurm site: access, processor, scratch (`io_dir`),
    the options every srun and every MPI launch there needs, the RDMA NIC's environment and
    the features of its file system and NPS mode come from the site's facts."""
    nodes = facts.nodes[group]
    extras = {'site': facts.name, 'io_dir': nodes.scratch}
    if (nodes.cpu or {}).get('model'):
        # the facts declare these nodes' hardware: one of them records the baseline of all
        # (iostack.regression.node); jobs run on them, not where ReFrame runs
        extras['node_class'] = f'{facts.name}.{group}'
    if nodes.srun_options():
        extras['launcher_options'] = nodes.srun_options()
    if nodes.mpi_launcher_options():
        extras['mpi_launcher_options'] = nodes.mpi_launcher_options()
    if (nodes.cpu_frequency or {}).get('performance_khz'):
        extras['cpu_freq_khz'] = nodes.cpu_frequency['performance_khz']
    # what a job may use of a node: its memory, or on nodes shared between jobs what it asks
    memory = (nodes.slurm or {}).get('mem') if (nodes.slurm or {}).get('shared') else nodes.memory
    if memory:
        extras['mem_per_node'] = site_facts.mib(memory)
    for choice in ('short', 'large_memory'):
        if nodes.choice_access(choice):
            extras[f'{choice}_access'] = nodes.choice_access(choice)
    # the node layout the binding check (checks/binding.py) holds every job to
    layout = {k: v for k, v in (('nps', nodes.nps), ('smt', nodes.smt)) if v is not None}
    binds = bool(layout) and not (nodes.slurm or {}).get('shared')
    if binds:
        extras.update(layout)
    partition = {
        'scheduler': 'slurm',
        'access': nodes.slurm_access() + _account_access(run, facts) + settings.pop('access', []),
        'features': features + facts.io_features(group)
                    + ([f'nps{nodes.nps}'] if nodes.nps is not None else [])
                    + (['binding'] if binds else []),
        'extras': {**extras, **settings.pop('extras', {})},
        **settings,
    }
    if _ucx_env(nodes.rdma):
        partition['env_vars'] = _ucx_env(nodes.rdma)
    if (processor := nodes.reframe_processor()):
        partition['processor'] = processor
    return partition



# What each PrgEnv of a Cray site runs ([OIFS-HECToR]): the support libraries built with CCE
# for the compute nodes (and OpenIFS), and with GNU for the login and serial nodes, with the
# I/O benchmarks; by the compiler family of the PrgEnv (spack-env/sites/<site>/spack.yaml
# builds the same two stacks on every Cray site).
_CRAY_STACKS = {
    'cce': (['stack', 'fdb', 'grib', 'eccodes', 'cce', 'openifs'],
            {'app_modules': {'openifs': ['openifs']}}, ['eccodes', 'fdb', 'fio']),
    'gcc': (['stack', 'fdb', 'grib', 'eccodes', 'gnu', 'ior', 'io500', 'netcdf',
             'netcdf-output-bench', 'fdb-archive-bench', 'openmp', 'hwloc', 'darshan-runtime'],
            {**OPENMP_FLAG,
             'app_modules': {'ior': ['ior'], 'io500': ['io500'], 'hwloc': ['hwloc'],
                             'netcdf': ['netcdf-c', 'parallel-netcdf'],
                             'netcdf-output-bench': ['netcdf-output-bench'],
                             'fdb-archive-bench': ['fdb-archive-bench'],
                             'darshan-runtime': ['darshan-runtime', 'darshan-util']}},
            ['eccodes', 'fdb', 'fio']),
}


def _cray_pe_environments(facts):
    """The PrgEnvs of a Cray site, as its users compile [ARCHER2-DevEnv]: the release's cpe
    module first (it pins every PE module to the release the stack was built with), then the
    PrgEnv, then `iostack` (modulefiles/iostack: the stack's modules of that compiler), then
    the stack's modules; the drivers cc/CC/ftn; and the release's libraries first on
    LD_LIBRARY_PATH, which a non-default release needs at run time."""
    pe = facts.programming_environment
    environments = []
    for prgenv, entry in pe['prgenvs'].items():
        features, extras, modules = _CRAY_STACKS[entry['compiler'].split('@')[0]]
        environments.append({
            'name': prgenv,
            'target_systems': [facts.name],
            'modules': [f"cpe/{pe['release']}", prgenv, 'iostack'] + modules,
            'cc': 'cc', 'cxx': 'CC', 'ftn': 'ftn',
            'env_vars': [['LD_LIBRARY_PATH', '$CRAY_LD_LIBRARY_PATH:$LD_LIBRARY_PATH']],
            'features': features,
            'extras': extras,
        })
    return environments



def _external_prefix(site, package):
    """The prefix of a site's Spack external (spack-env/sites/<site>/packages.yaml)."""
    import yaml

    with open(paths.REPO / 'spack-env' / 'sites' / site / 'packages.yaml') as f:
        packages = yaml.safe_load(f)['packages']
    return packages[package]['externals'][0]['prefix']



def _oci_partition(run, facts, nps):
    nodes = facts.nodes[f'compute-nps{nps}']
    return _slurm_partition(
        run, facts, nodes.name, ['fdb', 'grib', 'mpi', 'cpu'],
        name=f'nps{nps}',
        descr=f"{nodes.bmc['shape']} nodes ({nodes.summary()}), local NVMe",
        launcher='srun',
        environs=['gnu'],
        max_jobs=4,
        time_limit='3h',
    )


# Nodes shared between jobs (cray-ex's data-analysis nodes): this many jobs at a time, each
# asking for the cores and memory of the facts, stay within what one user may hold there
# (QoS serial [ARCHER2-Scheduler]).
_SHARED_NODE_JOBS = 4


def _cray_system(run, facts):
    """An HPE Cray EX site ([OIFS-HECToR]'s platform), from its facts alone: every Slurm
    node group is a partition; nodes of its own run the PrgEnvs' stacks through srun, with the
    facts' placement options on every srun (ARCHER2's one task per core, blocks of CCXs
    [ARCHER2-Scheduler] [EPCC-ReFrame]); nodes shared between jobs run the GNU tools and
    post-processing ([OIFS-HECToR]; ARCHER2's data-analysis nodes [ARCHER2-Analysis])."""
    prgenvs = list(facts.programming_environment['prgenvs'])
    gnu = [p for p, e in facts.programming_environment['prgenvs'].items()
           if e['compiler'].startswith('gcc@')]
    partitions = []
    for group in facts.nodes.values():
        if not group.slurm:
            continue
        if group.slurm.get('shared'):
            partitions.append(_slurm_partition(
                run, facts, group.name, ['fdb', 'grib', 'cpu'], name=group.name,
                descr=f'{group.name} nodes (shared) for GNU tools and post-processing',
                launcher='local', environs=gnu, max_jobs=_SHARED_NODE_JOBS, time_limit='1h'))
        else:
            partitions.append(_slurm_partition(
                run, facts, group.name, ['fdb', 'grib', 'mpi', 'cpu'], name=group.name,
                descr=f'{group.name} nodes ({group.summary()})', launcher='srun',
                environs=prgenvs, max_jobs=16, time_limit='2h'))
    return {
        'name': facts.name,
        'descr': facts.description,
        'hostnames': facts.hostnames,
        'modules_system': run.site_modules,
        'partitions': partitions,
    }



# local-cluster: this machine as a multi-node Slurm cluster (`iostack-testbed cluster up`,
# tools/testbed/iostack_testbed/cluster.py), nodes as ansible/inventories/local-cluster describes them, each
# with its own XFS at the OCI scratch path. A partition per kind of node, as Oracle's tips
# give each NPS mode its own (Slurm partitions nps1/nps2 [OCI-Tips-SlurmOps]); `smt`: a node
# booted with SMT on. Every node has this machine's CPUs; the NPS2 and SMT ones show them as
# their emulated BIOS would (Slurm's sockets and threads, hwloc's topology in their jobs).
# Their sruns place ranks as ARCHER2's do (one task per core, blocks [ARCHER2-Scheduler]),
# which the binding check (checks/binding.py) holds them to.
_LOCAL_CLUSTER_SRUN = ['--hint=nomultithread', '--distribution=block:block']


def _emulated_processor(run, nps, smt):
    """This machine's processor as a local-cluster node of NPS `nps` (its NUMA domains as
    Slurm's sockets) and SMT `smt` (pairs of its CPUs as a core's two threads) shows it to
    a job whose sruns run one task per core: the cores, as reframe_processor() counts an SMT
    node's under --hint=nomultithread (lib/iostack/site/facts.py)."""
    processor = {k: v for k, v in run.processor.items() if k != 'topology'}
    cpus = (processor.get('num_cpus') or os.cpu_count() or 1) // (2 if smt else 1)
    sockets = (processor.get('num_sockets') or 1) * nps
    processor.update(num_cpus=cpus, num_sockets=sockets, num_cpus_per_socket=cpus // sockets,
                     num_cpus_per_core=1)
    return processor



def _local_cluster_partition(run, name, nps, smt=False):
    # the SMT node has one core: no MPI job of two ranks or more runs there
    features = ['cpu', 'fdb', 'grib', 'small-io', 'slurm', 'nvme', f'nps{nps}', 'binding'] + (
        [] if smt else ['mpi'])
    return {
        'name': name,
        'descr': f'local-cluster nodes described as NPS{nps}, SMT {"on" if smt else "off"}, '
                 'node-local XFS scratch',
        'scheduler': 'squeue',
        'launcher': 'srun',
        'access': [f'--partition={name}'],
        'environs': ['builtin'],
        'max_jobs': 4,
        'time_limit': '30m',
        'prepare_cmds': run.prepare,
        'processor': _emulated_processor(run, nps, smt),
        'features': features,
        # the role's job directory (nvme_scratch_dirs: stage, 1777), as on OCI's nodes
        'extras': {'site': 'local', 'io_dir': '/mnt/localdisk/stage/iostack-rfm',
                   'mpi_launcher_options': ['--mpi=pmix'],
                   'launcher_options': _LOCAL_CLUSTER_SRUN, 'nps': nps, 'smt': smt},
        'env_vars': LOCAL_MPI_ENV,
    }



def _facts_system(run, facts):
    """The system of a site no code here describes: a Cray site's (_cray_system); else its
    node as `local` (the local scheduler), or a partition per Slurm node group; environments
    `stack` and, on Debian, `builtin` (its packages on PATH)."""
    if facts.programming_environment:
        return _cray_system(run, facts)
    environs = ['builtin', 'stack'] if facts.os.startswith('debian') else ['stack']
    if facts.scheduler == 'local':
        (nodes,) = facts.nodes.values()
        partitions = [{
            'name': 'default',
            'descr': f'this node ({nodes.summary()})',
            'scheduler': 'local',
            'launcher': 'mpirun-ranks',
            'environs': environs,
            'max_jobs': 2,
            'time_limit': '30m',
            'prepare_cmds': run.prepare,
            'processor': nodes.reframe_processor() or run.processor,
            'features': ['fdb', 'grib', 'mpi', 'cpu'],
            'extras': {'site': facts.name, 'mem_per_node': run.mem_mib},
            'env_vars': LOCAL_MPI_ENV,
        }]
    else:
        partitions = [
            _slurm_partition(run, facts, group.name, ['fdb', 'grib', 'mpi', 'cpu', 'slurm'],
                             name=group.name, descr=f'Slurm partition '
                             f"{group.slurm['partition']} ({group.summary()})",
                             launcher='srun', environs=environs, max_jobs=8, time_limit='1h')
            for group in facts.nodes.values() if group.slurm]
        for partition in partitions:
            if partition['extras']['io_dir'] is None:
                del partition['extras']['io_dir']   # the stage directory
    return {
        'name': facts.name,
        'descr': facts.description,
        'hostnames': facts.hostnames,
        'modules_system': run.local_modules if facts.scheduler == 'local' else run.site_modules,
        'partitions': partitions,
    }



def _local_systems(run: Run, facts) -> list[dict]:
    return [
        {
            'name': 'local',
            'descr': f'{facts.description}, local scheduler (the embedded default)',
            'hostnames': facts.hostnames,
            'modules_system': run.local_modules,
            'partitions': [
                {
                    'name': 'default',
                    'descr': 'this node',
                    'scheduler': 'local',
                    'launcher': 'mpirun-ranks',
                    'environs': ['builtin', 'stack'],
                    'max_jobs': 2,
                    'time_limit': '30m',
                    'prepare_cmds': run.prepare,
                    'processor': run.processor,
                    'features': LOCAL_FEATURES,
                    'extras': {'site': 'local', 'mem_per_node': run.mem_mib},
                    'env_vars': LOCAL_MPI_ENV,
                },
            ],
        },
        {
            # The local site's stack behind a single-node Slurm (tools/testbed/iostack_testbed/slurm.py
            # starts one; SLURM_CONF points at it). `squeue`, not `slurm`: there is no
            # accounting database for sacct.
            'name': 'local-slurm',
            'descr': 'this node as a single-node Slurm cluster',
            'hostnames': [],
            'modules_system': run.local_modules,
            'partitions': [
                {
                    'name': 'default',
                    'descr': 'Slurm partition iostack on this node',
                    'scheduler': 'squeue',
                    'launcher': 'srun',
                    'access': ['--partition=iostack'],
                    'environs': ['builtin', 'stack'],
                    'max_jobs': 2,
                    'time_limit': '10m',
                    'prepare_cmds': run.prepare,
                    'processor': run.processor,
                    'features': LOCAL_FEATURES + ['slurm'],
                    # Open MPI 4.1 is launched by srun through PMIx (MpiDefault=pmix in
                    # the generated slurm.conf; a site's own Slurm may default to none)
                    'extras': {'site': 'local', 'mpi_launcher_options': ['--mpi=pmix'],
                               'mem_per_node': run.mem_mib},
                    # PMIx keeps a directory per job step, /tmp/spmix_appdir_<uid>_<job>.<step>
                    # by default; each throwaway cluster (tools/testbed/iostack_testbed/slurm.py) numbers its
                    # jobs from 1, so a leftover directory fails a later cluster's step: keep
                    # them in the cluster's own state directory, beside its slurm.conf
                    'env_vars': LOCAL_MPI_ENV + [
                        ['SLURM_PMIX_TMPDIR', '$(dirname ${SLURM_CONF:-/tmp/.})']],
                },
            ],
        },
        {
            'name': 'local-cluster',
            'descr': 'this machine as a multi-node Slurm cluster (iostack-testbed cluster up)',
            'hostnames': [],
            'modules_system': 'lmod',
            'partitions': [_local_cluster_partition(run, 'nps1', 1),
                           _local_cluster_partition(run, 'nps2', 2),
                           _local_cluster_partition(run, 'smt', 1, smt=True)],
        },
    ]


def _oci_systems(run: Run, facts) -> list[dict]:
    return [
        {
            # Oracle Cloud BM.Optimized3.36 cluster [OCI-OpenFOAM]: one Slurm partition per
            # NPS mode, the case on local NVMe.
            'name': 'oci-bm-optimized3',
            'descr': facts.description,
            'hostnames': facts.hostnames,
            'modules_system': run.site_modules,
            'partitions': [_oci_partition(run, facts, 1), _oci_partition(run, facts, 2)],
        },
    ]


def systems(site: str, run: Run) -> list[dict]:
    """The ReFrame systems of a site, from its facts: local's (this node, a single-node
    Slurm, the local cluster), OCI's (a partition per NPS mode), a Cray site's
    (_cray_system), and every other site's (_facts_system: what `bin/iostack site init`
    writes)."""
    facts = site_facts.load(site)
    if site == 'local':
        return _local_systems(run, facts)
    if site == 'oci-bm-optimized3':
        return _oci_systems(run, facts)
    return [_facts_system(run, facts)]


def environments(site: str, run: Run) -> list[dict]:
    """The programming environments of a site's systems: `builtin` (Debian's packages) where
    the site is Debian, `stack` (the site's Spack stack as Lmod modules) where it is no Cray
    site, a Cray site's PrgEnvs, OCI's `gnu`; each with the site's own ecCodes definitions
    on ecCodes' search path (_grib_definitions)."""
    facts = site_facts.load(site)
    envs = _site_environments(site, run, facts)
    for env in envs:
        env['env_vars'] = env.get('env_vars', []) + _grib_definitions(facts)
    return envs


def _grib_definitions(facts) -> list[list[str]]:
    """The site's definition directories (facts `grib_definitions`), in order, before
    whatever ecCodes' module put on its search path (a package of definitions: the module
    loads it), so the ecCodes of every environment, Debian's too, finds them."""
    dirs = facts.grib_definition_dirs
    if not dirs:
        return []
    var = 'ECCODES_EXTRA_DEFINITION_PATH'
    return [[var, ':'.join(dirs) + f'${{{var}:+:${var}}}']]


def _site_environments(site: str, run: Run, facts) -> list[dict]:
    if facts.programming_environment:
        return _cray_pe_environments(facts)
    if site == 'oci-bm-optimized3':
        return [_oci_gnu(facts)]

    def offering(environ: str) -> list[str]:
        """The systems with a partition that runs in `environ`."""
        return [s['name'] for s in systems(site, run)
                if any(environ in p['environs'] for p in s['partitions'])]
    envs = []
    if facts.os.startswith('debian'):
        envs.append(_builtin(offering('builtin')))
    envs.append(_stack(offering('stack'), _local_stack_apps(run) if site == 'local' else {}))
    return envs


def _builtin(systems: list[str]) -> dict:
    return {
        # Debian's packages on PATH, no module: the node as installed. Its FDB 5.10.8
        # is the second FDB beside the Spack-built one.
        'name': 'builtin',
        'target_systems': systems,
        **MPI_ENVIRONMENT,
        # hwloc: Debian's libhwloc-dev (system-packages.toml [nightly])
        'features': MPI_FEATURES + ['fdb', 'grib', 'eccodes', 'openfoam', 'netcdf', 'hwloc'],
        # netcdf: Debian's parallel netCDF-C and PnetCDF; netcdf-output-bench is the
        # stack's (environment `stack`)
        'extras': OPENMP_FLAG,
        # Debian's OpenFOAM finds its etc/ through WM_PROJECT_DIR; its tutorials are
        # package openfoam-examples
        'env_vars': [['WM_PROJECT_DIR', '/usr/share/openfoam'],
                     ['FOAM_TUTORIALS', '/usr/share/doc/openfoam-examples/examples']],
    }


def _stack(systems: list[str], apps: dict[str, list[str]]) -> dict:
    return {
        # The site's Spack stack, built with Debian's gcc by `bin/iostack deploy` (its
        # Lmod tree is on MODULEPATH): eckit/metkit/FDB 5.13, IOR, io500, nvme-stage.
        # Needs a deployed root; without one, run the checks in `builtin`
        # (`-S valid_prog_environs=builtin`).
        'name': 'stack',
        'target_systems': systems,
        'modules': ['openmpi', 'fdb', 'ior', 'io500', 'nvme-stage', 'fdb-archive-bench',
                    'netcdf-output-bench'],
        **MPI_ENVIRONMENT,
        'features': MPI_FEATURES + ['stack', 'gnu', 'fdb', 'grib', 'eccodes', 'ior',
                                     'io500', 'nvme-stage', 'fdb-pair', 'netcdf',
                                     'netcdf-output-bench', 'fdb-archive-bench',
                                     *apps],
        # the second FDB for the cross-version check: Debian's
        'extras': {'other_fdb_bin': '/usr/bin', 'app_modules': apps,
                   **OPENMP_FLAG},
    }


def _oci_gnu(facts) -> dict:
    return {
        'name': 'gnu',
        'target_systems': [facts.name],
        'modules': ['openmpi', 'eccodes', 'fdb', 'fio'],
        'cc': 'gcc', 'cxx': 'g++', 'ftn': 'gfortran',
        'features': ['stack', 'fdb', 'grib', 'eccodes', 'gnu', 'openfoam', 'nvme-stage',
                     'ior', 'io500', 'netcdf', 'netcdf-output-bench', 'fdb-archive-bench',
                     'openmp', 'hwloc', 'darshan-runtime'],
        # the hwloc of Oracle Japan's Slurm and PMIx [OCI-Tips-Slurm], a Spack external
        # (no module): through pkg-config
        'env_vars': [['PKG_CONFIG_PATH',
                      f"{_external_prefix(facts.name, 'hwloc')}/lib/pkgconfig"
                      ':$PKG_CONFIG_PATH']],
        'extras': {**OPENMP_FLAG,
                   'app_modules': {'openfoam': ['openfoam'], 'nvme-stage': ['nvme-stage'],
                                   'ior': ['ior'], 'io500': ['io500'],
                                   'netcdf': ['netcdf-c', 'parallel-netcdf'],
                                   'netcdf-output-bench': ['netcdf-output-bench'],
                                   'fdb-archive-bench': ['fdb-archive-bench'],
                                   'darshan-runtime': ['darshan-runtime', 'darshan-util']}},
    }


def site_configuration(site: str, environ: Mapping[str, str] | None = None) -> dict:
    """ReFrame's configuration of one site: its systems and their environments, the modes
    (deploy, nightly, weekly), the results DB and the logs, under the run's state directory.
    `environ`: the ReFrame process's environment (default os.environ)."""
    run = Run.of(os.environ if environ is None else environ)
    # ReFrame's log file handler does not create its directory.
    os.makedirs(run.state, exist_ok=True)
    if site == 'local' and not run.lmod:
        print('iostack ReFrame config: LMOD_CMD is not set, so systems local and local-slurm '
              'load no modules (environment `stack` needs them); to use Lmod, `source '
              '/usr/share/lmod/lmod/init/bash` (it sets LMOD_CMD) or run through bin/iostack',
              file=sys.stderr)
    found = systems(site, run)
    for system in found:
        # a run by hand writes its stage and output there too (bin/iostack gives --prefix)
        system.setdefault('prefix', run.state)
    return {
        'systems': found,
        'environments': environments(site, run),
        'modes': [
            {
                # What `bin/iostack deploy` runs on a release before it becomes current: the
                # checks tagged `deploy`, which need only what set-up installs for deploying
                # (system-packages.toml `deploy`) and judge correctness, never a node's speed.
                'name': 'deploy',
                'options': ['--max-retries=1', '--exec-policy=async', '--tag=deploy',
                            f'--report-junit={run.state}/reports/junit-deploy.xml'],
            },
            {
                # Every night: the checks tagged `nightly`, one retry for flaky nodes.
                'name': 'nightly',
                'options': ['--max-retries=1', '--exec-policy=async', '--tag=nightly',
                            f'--report-junit={run.state}/reports/junit-nightly.xml'],
            },
            {
                # Weekly: also the parameter sweeps tagged `weekly` (FDB tunables).
                'name': 'weekly',
                'options': ['--max-retries=2', '--exec-policy=async', '--tag=nightly|weekly',
                            f'--report-junit={run.state}/reports/junit-weekly.xml'],
            },
        ],
        'storage': [
            {
                # ReFrame's results DB: every session and its perf values, with the stack's
                # identity in the session extras (bin/iostack nightly). Read by
                # `bin/iostack report` and `bin/iostack record-baseline`.
                'enable': True,
                'sqlite_db_file': f'{run.state}/results.db',
            },
        ],
        'general': [
            {
                'check_search_path': [str(paths.REFRAME_DIR / 'checks')],
                'check_search_recursive': True,
                'report_file': f'{run.state}/reports/run-report-{{sessionid}}.json',
            },
        ],
        'logging': [
            {
                'handlers': [
                    {'type': 'stream', 'name': 'stdout', 'level': 'info', 'format': '%(message)s'},
                    {'type': 'file', 'name': f'{run.state}/reframe.log', 'level': 'debug',
                     'format': '[%(asctime)s] %(levelname)s: %(check_info)s: %(message)s',
                     'append': False},
                ],
                'handlers_perflog': [
                    {'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
                     'level': 'info',
                     'format': ('%(check_job_completion_time)s|%(check_info)s|'
                                '%(check_perf_var)s=%(check_perf_value)s %(check_perf_unit)s|'
                                'ref=%(check_perf_ref)s'),
                     'append': True},
                ],
            },
        ],
    }
