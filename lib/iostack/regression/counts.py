"""Work counts: what a timed program does per field, counted rather than timed (issue 38).

Instructions executed, system calls by name, bytes written and syncs come out the same on
every run, on any node, where times do not; so they are gated to within 1% (a 2% increase
always fails), on every commit. Counted inside the timed region only:

- instructions: valgrind's callgrind with collection off at start and toggled on entry and
  exit of the timed calls (`--toggle-collect`): fdb-archive-bench's `timed_archive` and
  `timed_flush` (kept out of line for this), ecCodes' encode (`grib_set_values`,
  `grib_set_double_array`, `grib_get_message`) and decode (`grib_handle_new_from_message`,
  `grib_get_double_array`) under its own tools, FDB's retrieve (`fdb5::FDB::retrieve` and
  its handle's reads);
- system calls by name, bytes given to write calls, fsync/fdatasync: strace -f of the
  whole program (strace cannot see a region). IOR and mdtest, whose time is the file
  system's, are counted by these alone, and only their calls on files under the work
  directory (strace -y): MPI's threads, pipes and sockets vary with the run's timing.

Per field: every workload runs at N and 2N fields, and a count per field is the difference
over the extra N fields, so start-up, the first field's database creation and the program's
exit cancel out.

The workloads (WORKLOADS) are small: a few fields of gribgen's 37x72 grid, the template
fdb_throughput.py archives (an ensemble member on level 1). References for one build are
YAML under reframe-tests/references/counts/ (`<site>-<hash7>.yaml`, the hash of the
release's fdb-archive-bench, whose DAG covers FDB, eckit, metkit and ecCodes): each count's
median over the recording's runs, its spread, its band, and the instructions per field of
the functions that do most of the work, which name what grew when a count moves
(callgrind_annotate's per-function table, the tool's own reading of its output).
"""
from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import os
import pathlib
import re
import shutil
import statistics
import sys
from collections.abc import Callable, Mapping, Sequence

import yaml

from iostack.core import paths, process
from iostack.core.errors import Failed, IostackError

log = logging.getLogger(__name__)

REFERENCES_DIR = paths.REFRAME_DIR / "references" / "counts"
#: the band never exceeds this, so a 2% increase of any gated count fails
MAX_TOLERANCE = 0.01
#: nor is it narrower than this: room for a count's last digits (timestamps, pids)
MIN_TOLERANCE = 0.001
#: a count whose recorded runs spread wider than this is shown, not gated
GATE_SPREAD = 0.005
#: functions kept per workload in a reference (by instructions per field)
TOP_FUNCTIONS = 40
WRITES = ("write", "pwrite64", "writev", "pwritev", "pwritev2")
SYNCS = ("fsync", "fdatasync")


class CountsError(IostackError):
    """A count run that cannot start or whose program failed (exit status 2)."""


@dataclasses.dataclass(frozen=True)
class Programs:
    """What is counted: fdb-archive-bench (the release's or one built elsewhere); ecCodes'
    tools (grib_filter, grib_get_data, grib_set, codes_info) and valgrind, strace from PATH."""
    bench: pathlib.Path
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: netcdf-output-bench (the release's), for the NetCDF workload; None: not counted
    netcdf: pathlib.Path | None = None
    #: IOR's bin/ (ior and mdtest, the release's), for their workloads; None: not counted
    ior: pathlib.Path | None = None
    #: nvme-stage (the release's script; rsync from PATH), for its workload; None: not counted
    nvme_stage: pathlib.Path | None = None
    #: multio-hammer (the release's MultIO), for its workload; None: not counted
    multio: pathlib.Path | None = None
    #: OpenIFS's prefix (the release's, an `nwp` environment's: bin/ifsMASTER.*, share/openifs
    #: with ifs-test), for its workload; None: not counted
    openifs: pathlib.Path | None = None
    #: what the references are keyed by: {"site": ..., "fdb-archive-bench": hash, ...}
    build: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    description: str
    #: fields at the small size; the large one is twice as many
    fields: int
    #: callgrind --toggle-collect patterns: the timed region
    toggles: tuple[str, ...]
    #: the command at a size (1 or 2), given the work directory's inputs
    command: Callable[[Programs, pathlib.Path, int], tuple[list[str], dict[str, str]]]
    #: the Programs field it needs besides the bench (None: the bench and PATH's tools)
    needs: str | None = None
    #: the system calls gated by name (None: every one the recording found steady); the
    #: others, and their total, are shown only
    gated_calls: tuple[str, ...] | None = None
    #: callgrind's instructions too (False: system calls and bytes only, for the programs
    #: whose time is the file system's)
    instructions: bool = True
    #: the narrowest band of its instructions (a fraction); None: shown, never gated (a
    #: library whose work follows the heap's layout, which MPI's threads leave different)
    instructions_floor: float | None = MIN_TOLERANCE
    #: count only the system calls on files under the work directory (its outputs), not
    #: those of the MPI library's own threads, pipes and sockets
    own_files_only: bool = False

    def available(self, programs: Programs) -> bool:
        return self.needs is None or getattr(programs, self.needs) is not None


# fdb-archive-bench: N steps of 4 params, a flush per step
FDB_STEPS, FDB_PARAMS = 2, 4
# gribgen's set: 1 level, so 4 pressure-level + 2 surface fields per step
GRIB_STEPS, GRIB_LEVELS, GRID = 1, 1, (37, 72)


def _fdb_root(programs: Programs, work: pathlib.Path, name: str, size: int) -> dict[str, str]:
    """An empty FDB root for a workload at a size, and the environment that selects it."""
    root = work / f"fdb-{name}-{size}"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    config = work / f"fdb-{name}-{size}.yaml"
    config.write_text(f"type: local\nengine: toc\nschema: {_schema(programs)}\n"
                      f"spaces:\n- roots:\n  - path: {root}\n")
    return {"FDB5_CONFIG_FILE": str(config), "FDB_HOME": str(work / "fdb-home"),
            # FDB's default durability, said out loud: synchronous, data synced per flush
            "FDB_ASYNC_WRITE": "0", "FDB_DATA_SYNC_ON_FLUSH": "1"}


def _bench_args(programs: Programs, work: pathlib.Path, path: str, size: int) -> list[str]:
    return [str(programs.bench), "--template", str(work / "template.grib"), "--path", path,
            "--nsteps", str(FDB_STEPS * size), "--nparams", str(FDB_PARAMS)]


def _fdb_command(path: str):
    def command(programs: Programs, work: pathlib.Path, size: int):
        return _bench_args(programs, work, path, size), _fdb_root(programs, work, path, size)
    return command


def _multio_command(programs: Programs, work: pathlib.Path, size: int):
    """multio-hammer (transport none: its plan's Sink archives into FDB in its own process),
    as the MultIO throughput and Darshan checks run it: FDB_PARAMS surface fields of the FDB
    workloads' template per step, a flush per step (per field: per field archived)."""
    assert programs.multio is not None
    return [str(programs.multio), f"--config={work / 'multio-hammer.yaml'}",
            f"--nbsteps={FDB_STEPS * size}", "--nblevels=1", "--member=1",
            str(work / "template.grib")], _fdb_root(programs, work, "multio", size)


def _retrieve_command(programs: Programs, work: pathlib.Path, size: int):
    """The fields archived first (not counted, and under the same host name and process id
    as every counted run, so the files' names are the same), then read back by
    fdb-archive-bench --verify: fdb5::FDB::retrieve of each field's key and its data read."""
    env = _fdb_root(programs, work, "retrieve", size)
    args = _bench_args(programs, work, "key", size)
    _run(isolated(args), {**programs.env, **env}, work, "archiving the fields to retrieve",
         alone=True)
    return [*args, "--verify"], env


def _encode_command(programs: Programs, work: pathlib.Path, size: int):
    out = work / f"encoded-{size}.grib"
    return ["grib_filter", "-o", str(out), str(work / f"rules-{size}.txt"),
            str(work / "GRIB2.tmpl")], {}


def _decode_command(programs: Programs, work: pathlib.Path, size: int):
    # grib_get_data prints every value: the printing is outside the region
    return ["grib_get_data", str(work / f"fields-{size}.grib")], {}


# FDB's own timing statistics are left out: they format the times they measure, whose
# digits (and so instructions) vary from run to run
def _netcdf_command(programs: Programs, work: pathlib.Path, size: int):
    out = work / f"netcdf-{size}"
    shutil.rmtree(out, ignore_errors=True)
    # one rank (MPI's singleton), durable at every output step as the gated figure is
    return [str(programs.netcdf), "--mode", "serial", "--days", str(size), "--sync", "step",
            "--output-dir", str(out)], {}


def _netcdf_library_command(library: str, mode: str = "combined"):
    def command(programs: Programs, work: pathlib.Path, size: int):
        out = f"{library}-{mode}-{size}"
        shutil.rmtree(work / out, ignore_errors=True)
        # one rank, a file per output type through the library, durable at every step; the
        # directory named relative to the work directory (the program's own): HDF5 compares
        # file names
        return [str(programs.netcdf), "--mode", mode, "--library", library, "--days",
                str(size), "--sync", "step", "--output-dir", out], {}
    return command


# IOR and mdtest: MPI programs, one rank (MPI's singleton). Their time is the file system's,
# so only what they ask of it is counted: the system calls on their own files, and bytes
# (MPI's threads poll, sleep and write to their pipes as the run's timing has it).
IOR_BLOCK, IOR_TRANSFER = 1 << 20, 64 << 10


def _ior_program(programs: Programs, name: str) -> str:
    """ior or mdtest from the release's IOR (their workloads need "ior": never run without)."""
    assert programs.ior is not None
    return str(programs.ior / name)


def _ior_command(programs: Programs, work: pathlib.Path, size: int):
    """IOR's POSIX backend, one file: `size` segments of a 1 MiB block in 64 KiB transfers
    written, fsynced at close (-e), then read back (per field: per transfer written and
    read)."""
    out = work / f"ior-{size}"
    out.unlink(missing_ok=True)
    return [_ior_program(programs, "ior"), "-a", "POSIX", "-w", "-r", "-e", "-b", str(IOR_BLOCK),
            "-t", str(IOR_TRANSFER), "-s", str(size), "-o", str(out)], {}


MDTEST_FILES = 64


def _mdtest_command(programs: Programs, work: pathlib.Path, size: int):
    """mdtest's four file phases (create, stat, read, remove) on empty files, one directory
    (per field: per file)."""
    out = work / f"mdtest-{size}"
    shutil.rmtree(out, ignore_errors=True)
    return [_ior_program(programs, "mdtest"), "-F", "-n", str(MDTEST_FILES * size), "-d", str(out),
            "-i", "1"], {}


#: nvme-stage's stage-in: files of 64 KiB in an OpenFOAM case's three directories
NVME_FILES, NVME_FILE_BYTES = 8, 64 << 10


def _stage_in_command(programs: Programs, work: pathlib.Path, size: int):
    """nvme-stage stage-in (one local rsync -a) of a case of NVME_FILES x `size` files into
    an empty directory (per field: per file)."""
    assert programs.nvme_stage is not None
    case, local = work / f"case-{size}", work / f"local-{size}"
    shutil.rmtree(case, ignore_errors=True)
    shutil.rmtree(local, ignore_errors=True)
    dirs = ("0", "constant", "system")
    for d in dirs:
        (case / d).mkdir(parents=True)
    for i in range(NVME_FILES * size):
        (case / dirs[i % 3] / f"f{i:03d}").write_bytes(bytes(range(256)) * (NVME_FILE_BYTES // 256))
    return [str(programs.nvme_stage), "stage-in", str(case), str(local)], {}


#: the model's time step: CNT4's loop calls STEPO once a step (gfortran's names)
OPENIFS_STEP = ("stepo_",)
#: OpenIFS: Held-Suarez at T21L19 (the idealised check's smoke case), hours of forecast at
#: size 1 (TSTEP 3600 s: a step an hour)
OPENIFS_CASE, OPENIFS_HOURS = "hs_t21l19", 3


def _openifs_command(programs: Programs, work: pathlib.Path, size: int):
    """ifsMASTER forecasting the case from its analytic state (N3DINI=2: no ECMWF data) with
    no output (N1HIS=0, N1POS=0: the model's own work), one rank of one thread, for
    OPENIFS_HOURS x size steps: the step loop is counted (per field: per time step). Its
    namelist is the idealised check's (iostack_rfm.jobs.openifs_idealised fort4), written
    where the model reads it, the work directory, before each run."""
    assert programs.openifs is not None
    groups = programs.openifs / "share" / "openifs" / "ifs-test" / "share" / "ifs_test" / \
        "namelist"
    (model,) = sorted((programs.openifs / "bin").glob("ifsMASTER.*"))
    _run([sys.executable, "-m", "iostack_rfm.jobs.openifs_idealised", "fort4", OPENIFS_CASE,
          "none", "--nproc", "1", "--groups", str(groups), "--set",
          f"NAMRIP:CSTOP='h{OPENIFS_HOURS * size}'", "--out", str(work / "fort.4")],
         {"PYTHONPATH": paths.job_pythonpath()}, work, "writing OpenIFS's namelist")
    # the check's run environment: one OpenBLAS thread, the OpenMP stack ifs-test sets, and
    # ecCodes' IFS samples (the model makes its GRIB handles from them even with no output)
    definitions = process.capture(["codes_info", "-d"], check=True).stdout.strip()
    samples = pathlib.Path(definitions).parent / "ifs_samples" / "grib1_mlgrib2"
    return [str(model)], {"OMP_NUM_THREADS": "1", "OMP_STACKSIZE": "64M",
                          "OPENBLAS_NUM_THREADS": "1", "GRIB_SAMPLES_PATH": str(samples)}


# netcdf-output-bench's INMCM6P day: 71 + 7 + 10 + 44 x 4 + 37 x 8 + 2 x 24 record writes
NETCDF_RECORDS_PER_DAY = 608
#: fdb5::FDB::retrieve finds the field (the index lookups) and returns a handle, which reads
#: it (FDB's HandleGatherer makes an eckit::MultiHandle of PartFileHandles)
TIMED_RETRIEVE = ("*fdb5::FDB::retrieve*", "*MultiHandle::openForRead*", "*MultiHandle::read*",
                  "*MultiHandle::close*")
TIMED_FDB = ("*timed_archive*", "*timed_flush*", "*FDBStats::addArchive*", "*FDBStats::addFlush*")
#: multio-hammer's work per field: the message through the plan's actions into the sink,
#: and each step's flush
MULTIO_REGION = ("*multio::action::Plan::process*",)
WORKLOADS = {w.name: w for w in (
    Workload("fdb-archive-key", "FDB archive with the key (fdb5::FDB::archive(key, data, "
             "length)), a flush per step", FDB_STEPS * FDB_PARAMS, TIMED_FDB, _fdb_command("key")),
    Workload("fdb-archive-message", "FDB archive from the message (FDB decodes its key)",
             FDB_STEPS * FDB_PARAMS, TIMED_FDB, _fdb_command("message")),
    Workload("fdb-retrieve", "FDB retrieve of each field by its key, its data read whole "
             "(fdb-archive-bench --verify, after an archive that is not counted)",
             FDB_STEPS * FDB_PARAMS, TIMED_RETRIEVE, _retrieve_command,
             # its memcmp follows where the release is installed (the libraries' paths in
             # ld.so's heap): a deploy of the same build under CI's pytest directory counted
             # 0.11-0.12% fewer than the references' (3 runs steady there): 2% still fails
             instructions_floor=0.005),
    Workload("multio-fdb", "multio-hammer into FDB through MultIO's plan (a Sink action, the "
             "fdb5 sink), a flush per step", FDB_STEPS * FDB_PARAMS, MULTIO_REGION,
             _multio_command, needs="multio"),
    Workload("grib-encode", "ecCodes encoding gribgen's fields (grib_filter: header keys, "
             "values packed to 16 bits, the message)", GRIB_STEPS * (4 * GRIB_LEVELS + 2),
             ("grib_set_values", "grib_set_double_array", "grib_get_message"), _encode_command),
    Workload("grib-decode", "ecCodes decoding gribgen's fields (grib_get_data: the handle "
             "from the message, the values unpacked)", GRIB_STEPS * (4 * GRIB_LEVELS + 2),
             ("grib_handle_new_from_message", "grib_get_double_array"), _decode_command),
    Workload("netcdf-serial", "netcdf-output-bench --mode serial --sync step, one rank: each "
             "record gathered to rank 0 and pwrite()n to its field's file, an fsync per file "
             "and step (per field: per record written)", NETCDF_RECORDS_PER_DAY,
             ("posix_write", "posix_sync"), _netcdf_command, needs="netcdf",
             # MPI's progress thread polls and wakes as the run's timing has it
             gated_calls=("pwrite64", "fsync")),
    Workload("netcdf-c-combined", "netcdf-output-bench --mode combined --library netcdf "
             "--sync step, one rank: each record put through netCDF-C (HDF5) into its output "
             "type's file, nc_sync per file and step (per field: per record written)",
             NETCDF_RECORDS_PER_DAY, ("nc_put_vara*", "nc_sync"), _netcdf_library_command("netcdf"),
             needs="netcdf", own_files_only=True,
             # HDF5's strcmp and memset moved by up to 0.7% between runs (10 runs: 88,592 to
             # 89,188 a record), with the heap as MPI's threads left it
             instructions_floor=None),
    Workload("pnetcdf-combined", "the same through PnetCDF (--library pnetcdf): "
             "ncmpi_put_vara_all, ncmpi_sync (per field: per record written)",
             NETCDF_RECORDS_PER_DAY, ("ncmpi_put_vara*", "ncmpi_sync"),
             _netcdf_library_command("pnetcdf"), needs="netcdf", own_files_only=True),
    Workload("pnetcdf-batching", "the same batching 8 records of a field in one call "
             "(--mode batching; per field: per record written)", NETCDF_RECORDS_PER_DAY,
             ("ncmpi_put_vara*", "ncmpi_sync"), _netcdf_library_command("pnetcdf", "batching"),
             needs="netcdf", own_files_only=True),
    Workload("ior-posix", "IOR, POSIX, one rank: 1 MiB segments in 64 KiB transfers written, "
             "fsynced at close, read back (per field: per transfer)", IOR_BLOCK // IOR_TRANSFER,
             (), _ior_command, needs="ior", instructions=False, own_files_only=True),
    Workload("mdtest-files", "mdtest -F, one rank: empty files created, stat()ed, read and "
             "removed in one directory (per field: per file)", MDTEST_FILES, (), _mdtest_command,
             needs="ior", instructions=False, own_files_only=True),
    Workload("nvme-stage-in", "nvme-stage stage-in, one local rsync -a of a case's files of "
             "64 KiB into an empty directory (per field: per file)", NVME_FILES, (),
             _stage_in_command, needs="nvme_stage", instructions=False, own_files_only=True,
             # rsync sets the directories' times again (0 or 7 calls a run) when a second
             # turns during the copy
             gated_calls=("openat", "close", "newfstatat", "read", "write", "renameat",
                          "fchmod")),
    Workload("openifs-step", "OpenIFS 48r1.1.0's ifsMASTER, Held-Suarez T21L19 from its "
             "analytic state, no output, one rank and thread: its time steps (per field: per "
             "step)", OPENIFS_HOURS, OPENIFS_STEP, _openifs_command, needs="openifs",
             # its own files: what the model writes (NODE.001_01, ifs.stat) per step
             own_files_only=True,
             # glibc's allocator (_int_free, malloc_consolidate) moves a step's instructions:
             # 3 runs spread 0.18%, 5 others 0.02%; gated at 0.5%, a 2% loop still fails
             instructions_floor=0.005),
)}


def _schema(programs: Programs) -> pathlib.Path:
    from iostack.deployment import fdbconfig

    try:
        return fdbconfig.find_schema(programs.env)
    except FileNotFoundError as e:
        raise CountsError(str(e)) from None


def _run(cmd: Sequence[str], env: Mapping[str, str], cwd: pathlib.Path,
         what: str, alone: bool = False) -> process.CompletedProcess:
    """Run a program (shown first, as every command of iostack's), `env` added to this
    process's environment, or with `alone` only `env` and alone_env(); its failure is one
    line."""
    if alone:
        cmd = ["env", "-i", *(f"{k}={v}" for k, v in sorted({**alone_env(cwd), **env}.items())),
               *cmd]
    p = process.capture(list(cmd), env_extra=None if alone else dict(env), cwd=cwd, timeout=1800)
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise CountsError(f"{what} failed (exit status {p.returncode}): {last}")
    return p


def require_tools() -> None:
    missing = [t for t in (*TOOLS, "callgrind_annotate") if not shutil.which(t)]
    if missing:
        raise CountsError("work counts need " + ", ".join(missing) + " on PATH (Debian: "
                          "valgrind, strace, libeccodes-tools)")


def prepare(programs: Programs, work: pathlib.Path) -> None:
    """The inputs: gribgen's fields (the checks' own writer, iostack_rfm.jobs.gribgen) at
    both sizes, their grib_filter rules, and fdb_throughput.py's template."""
    # the job tools' path, as the checks' jobs have it
    env = {**programs.env, "PYTHONPATH": paths.job_pythonpath()}
    script = ("import shutil, sys\nfrom iostack_rfm.jobs import gribgen\n"
              "shutil.copy(gribgen.sample(), 'GRIB2.tmpl')\n"
              "for size in (1, 2):\n"
              f"    sizes = ({GRIB_STEPS} * size, {GRIB_LEVELS}, {GRID[0]}, {GRID[1]})\n"
              "    with open(f'rules-{size}.txt', 'w') as f:\n"
              "        f.writelines(line + '\\n' for line in gribgen.rules(*sizes))\n"
              "    gribgen.write(f'fields-{size}.grib', *sizes)\n"
              f"gribgen.write('first.grib', 1, 1, {GRID[0]}, {GRID[1]}, count=1)\n"
              "from iostack_rfm.jobs import multio\n"
              "with open('multio-hammer.yaml', 'w') as f:\n"
              f"    f.write(multio.hammer_config({FDB_PARAMS}))\n")
    _run([sys.executable, "-c", script], env, work, "writing gribgen's fields")
    _run(["grib_set", "-s", "productDefinitionTemplateNumber=1,type=pf,stream=enfo,number=1,"
          "level=1", "first.grib", "template.grib"], env, work, "grib_set of the template")
    (work / "fdb-home" / "etc" / "config").mkdir(parents=True, exist_ok=True)


_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


#: the tools a counted run starts by name (ecCodes' are counted themselves)
TOOLS = ("unshare", "setarch", "sh", "hostname", "valgrind", "strace", "grib_filter",
         "grib_get_data", "grib_set", "codes_info")
#: what a workload's own program starts (nvme-stage: bash, rsync), where the node has it
THEIR_TOOLS = ("bash", "rsync")


def alone_env(work: pathlib.Path) -> dict[str, str]:
    """All a counted program's environment holds besides its workload's variables. The
    environment and the program's path are copied onto the top of its stack, so their
    lengths move the alignment of what it keeps there: glibc's memcmp took 0.11% more
    instructions in fdb-retrieve with a longer environment, 0.40% from a longer deployment
    root (reframe-tests/README.md, "Work counts"). So nothing here depends on who
    runs the count: the work directory has a fixed length, and PATH holds the directories
    of the node's tools (valgrind finds its parts next to itself: no links)."""
    dirs = [os.path.dirname(t) for t in map(shutil.which, TOOLS + THEIR_TOOLS) if t]
    # TMPDIR: Open MPI names a singleton's session directory by host name and process id,
    # the same in every counted run (isolated()): two counts on one node at once collided
    # there ("Local abort before MPI_INIT completed"). Beside the work directory, not in
    # it: MPI's files are not the program's own (own_files_only)
    return {"PATH": ":".join(dict.fromkeys([*dirs, "/usr/bin", "/bin"])), "HOME": str(work),
            "LC_ALL": "C", "TMPDIR": f"{work}.tmp"}


def injected(environ: Mapping[str, str]) -> dict[str, str]:
    """What of the caller's environment the CLI adds to Programs.env: the test shims'
    LD_PRELOAD and IOSTACK_INJECT_* (a slowdown injected shows what the gate catches)."""
    return {k: v for k, v in environ.items() if k == "LD_PRELOAD" or k.startswith("IOSTACK_INJECT_")}


def stage(programs: Programs, work: pathlib.Path) -> Programs:
    """`programs` as seen through links in `work`/programs: the same files at paths whose
    length is the work directory's, wherever the release is installed."""
    staged = work / "programs"
    staged.mkdir(exist_ok=True)

    def link(name: str, target: pathlib.Path | None) -> pathlib.Path | None:
        if target is None:
            return None
        (staged / name).symlink_to(target)
        return staged / name

    env = {k: str(link(f"env-{k}", pathlib.Path(v)) if os.path.isabs(v) and os.path.exists(v) else v)
           for k, v in programs.env.items()}
    bench = staged / "fdb-archive-bench"
    bench.symlink_to(programs.bench)
    return dataclasses.replace(programs, bench=bench, env=env,
                               netcdf=link("netcdf-output-bench", programs.netcdf),
                               ior=link("ior", programs.ior),
                               nvme_stage=link("nvme-stage", programs.nvme_stage),
                               multio=link("multio-hammer", programs.multio),
                               openifs=link("openifs", programs.openifs))


#: what every counted program sees of its node: FDB names its files by host name and by a
#: number made from the process id, and formats them per field, so a longer host name or
#: a process id of one more digit moves the counts (0.1%); in new UTS and PID namespaces
#: both are the same on every run and node
HOSTNAME = "iostack-counts"


def isolated(cmd: Sequence[str], uid: int | None = None) -> list[str]:
    """`cmd` with host name HOSTNAME and process id 1 (root; others, the nightly's service
    account among them: in a user namespace), and its addresses not randomised: glibc maps a
    thread's malloc arena 64 MiB-aligned and unmaps the excess on either side, one munmap
    or two as the address falls (fdb-retrieve: one system call in eight runs, 0.9% of its
    per-field count). `uid`: whose run (default this process's)."""
    uid = os.geteuid() if uid is None else uid
    user = [] if uid == 0 else ["--user", "--map-root-user"]
    return ["unshare", *user, "--uts", "--pid", "--fork", "--", "setarch", "-R", "sh", "-c",
            f'hostname {HOSTNAME} && exec "$@"', "sh", *cmd]


def callgrind(cmd: list[str], env: Mapping[str, str], toggles: Sequence[str],
              work: pathlib.Path, label: str) -> tuple[int, pathlib.Path]:
    """Instructions executed in the toggled region, and callgrind's output file."""
    out = work / f"callgrind.{label}"
    vlog = work / f"valgrind.{label}.log"
    _run(isolated(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                   f"--log-file={vlog}", "--collect-atstart=no",
                   *(f"--toggle-collect={t}" for t in toggles), *cmd]),
         env, work, f"callgrind of {label}", alone=True)
    m = _COLLECTED.search(vlog.read_text())
    if not m:
        raise CountsError(f"callgrind of {label}: no 'Collected' line in {vlog}")
    return int(m.group(1)), out


_ANNOTATED = re.compile(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S.*?)\s*$")


def functions(out: pathlib.Path) -> dict[str, int]:
    """Instructions of each function (self cost) in a callgrind output, as
    callgrind_annotate tabulates them; a function's name without its file or object."""
    p = process.capture(["callgrind_annotate", "--threshold=100", "--inclusive=no", str(out)])
    if p.returncode != 0:
        raise CountsError(f"callgrind_annotate {out}: {p.stderr.strip()[-200:]}")
    table: dict[str, int] = {}
    started = False
    for line in p.stdout.splitlines():
        if "file:function" in line:
            started = True
            continue
        if not started or line.startswith("--"):
            continue
        m = _ANNOTATED.match(line)
        if not m:
            if table:
                break
            continue
        where = re.sub(r"\s+\[[^\]]*\]$", "", m.group(2))  # the object's path: node-specific
        name = where.split(":", 1)[1] if ":" in where else where
        table[name] = table.get(name, 0) + int(m.group(1).replace(",", ""))
    return table


_CALL = re.compile(r"^(?:\d+\s+)?(?:<\.\.\. (\w+) resumed>|(\w+)\()")
_AT_FDCWD = re.compile(r"(?<=AT_FDCWD)<[^>]*>")
_RESULT = re.compile(r"=\s*(-?\d+)(?:\s+\w+.*)?$")


def strace(cmd: list[str], env: Mapping[str, str], work: pathlib.Path,
           label: str, within: pathlib.Path | None = None) -> dict[str, int]:
    """System calls by name, bytes the write calls took and fsync/fdatasync calls of a run
    (every thread); with `within`, only the calls on files under it (syscall_counts)."""
    out = work / f"strace.{label}"
    decode = ["-y"] if within else []
    _run(isolated(["strace", "-f", "-qq", "-s", "0", *decode, "-o", str(out), *cmd]), env, work,
         f"strace of {label}", alone=True)
    return syscall_counts(out.read_text(errors="replace"), within)


def syscall_counts(trace: str, within: pathlib.Path | str | None = None) -> dict[str, int]:
    """The counts of an `strace -f` output; with `within` (and `strace -y`), only the calls
    whose path, or whose descriptor's file, is under it."""
    calls: dict[str, int] = {}
    written = 0
    # a call another thread interrupted is split into `<unfinished ...>` and `<... resumed>`
    # lines: it is judged and counted when it completes, on both (its path is in the first,
    # the descriptor it returns in the second), as a call printed whole is
    pending: dict[str, tuple[str, str]] = {}
    for line in trace.splitlines():
        m = _CALL.match(line)
        if not m:
            continue
        resumed, name = m.group(1), m.group(2)
        pid = line.split(None, 1)[0]
        if resumed:
            if pid not in pending:
                continue
            name, first = pending.pop(pid)
            text = first + line
        elif "<unfinished" in line:
            pending[pid] = (name, line)
            continue
        else:
            text = line
        # -y shows the working directory (the work directory) as AT_FDCWD's path, and
        # getcwd names it in its result: neither is a call on a file under it
        if within is not None and (name == "getcwd"
                                   or f"{within}/" not in _AT_FDCWD.sub("", text)):
            continue
        calls[name] = calls.get(name, 0) + 1
        if name in WRITES:
            r = _RESULT.search(line)
            if r and int(r.group(1)) > 0:
                written += int(r.group(1))
    counts = {f"syscall {k}": v for k, v in calls.items()}
    counts["syscalls"] = sum(calls.values())
    counts["bytes written"] = written
    counts["syncs"] = sum(calls.get(s, 0) for s in SYNCS)
    return counts


@dataclasses.dataclass
class Measurement:
    """One workload's counts per field, and its functions' instructions per field."""
    counts: dict[str, float]
    functions: dict[str, float]
    #: callgrind's outputs at both sizes, for a look by hand (callgrind_annotate); none for
    #: a workload counted without instructions
    outputs: tuple[pathlib.Path, ...]


def measure(workload: Workload, programs: Programs, work: pathlib.Path,
            strace_too: bool = True) -> Measurement:
    extra = workload.fields  # fields at size 2 less those at size 1
    instr, outs, sys_counts, tables = {}, {}, {}, {}
    for size in (1, 2):
        label = f"{workload.name}-{size}"
        if workload.instructions:
            cmd, env = workload.command(programs, work, size)
            instr[size], outs[size] = callgrind(cmd, {**programs.env, **env}, workload.toggles,
                                                work, label)
            tables[size] = functions(outs[size])
        else:
            tables[size] = {}
        if strace_too:
            cmd, env = workload.command(programs, work, size)
            sys_counts[size] = strace(cmd, {**programs.env, **env}, work, label,
                                      within=work if workload.own_files_only else None)
    counts = {"instructions": (instr[2] - instr[1]) / extra} if workload.instructions else {}
    if strace_too:
        for name in sorted(set(sys_counts[1]) | set(sys_counts[2])):
            counts[name] = (sys_counts[2].get(name, 0) - sys_counts[1].get(name, 0)) / extra
    per_function = {name: (tables[2].get(name, 0) - tables[1].get(name, 0)) / extra
                    for name in set(tables[1]) | set(tables[2])}
    return Measurement(counts, per_function, tuple(outs.values()))


def measure_all(programs: Programs, work: pathlib.Path,
                names: Sequence[str] | None = None) -> dict[str, Measurement]:
    require_tools()
    unknown = sorted(set(names or ()) - set(WORKLOADS))
    if unknown:
        raise CountsError(f"no workload {', '.join(unknown)}; there are: {', '.join(WORKLOADS)}")
    if not names:
        names = [n for n, w in WORKLOADS.items() if w.available(programs)]
    missing = [n for n in names if not WORKLOADS[n].available(programs)]
    if missing:
        raise CountsError(f"{', '.join(missing)}: its program is not given "
                          f"({', '.join(str(WORKLOADS[n].needs) for n in missing)})")
    prepare(programs, work)
    staged = stage(programs, work)
    return {name: measure(WORKLOADS[name], staged, work) for name in names}


# --- references and the gate ---------------------------------------------------------------

def tolerance(spread: float, floor: float = MIN_TOLERANCE) -> float:
    """A count's band, a fraction of its value: three times its recorded spread, between
    `floor` (MIN_TOLERANCE unless the workload says) and MAX_TOLERANCE."""
    return min(max(3 * spread, floor), MAX_TOLERANCE)


def reference(runs: Sequence[Mapping[str, Measurement]], build: Mapping[str, str],
              commit: str | None = None, valgrind: str | None = None) -> dict:
    """A reference from repeated runs: per count its median, spread ((max - min) / median),
    band and whether it is gated (spread at most GATE_SPREAD); per workload its top
    functions' instructions per field (the last run's)."""
    out: dict = {"build": dict(build), "recorded": {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%MZ"),
        "runs": len(runs), "commit": commit,
        "valgrind": valgrind}, "workloads": {}}
    for name in runs[0]:
        counts = {}
        keys = sorted(set().union(*(r[name].counts for r in runs)))
        calls = WORKLOADS[name].gated_calls
        for key in keys:
            values = [r[name].counts.get(key, 0.0) for r in runs]
            med = statistics.median(values)
            spread = ((max(values) - min(values)) / abs(med) if med
                      else float(max(values) != min(values)))
            # a count per field below 0 is noise in a whole-run count (the larger run made
            # fewer calls): never gated
            gated = spread <= GATE_SPREAD and med >= 0
            if calls is not None and (key == "syscalls" or (
                    key.startswith("syscall ") and key.split(" ", 1)[1] not in calls)):
                gated = False
            floor = WORKLOADS[name].instructions_floor if key == "instructions" else MIN_TOLERANCE
            if floor is None:
                gated = False
            counts[key] = {"value": round(med, 6), "spread": round(spread, 6),
                           "tolerance": round(tolerance(spread, floor), 6)
                           if gated and floor is not None else None}
        table = runs[-1][name].functions
        top = sorted(table, key=lambda f: -abs(table[f]))[:TOP_FUNCTIONS]
        out["workloads"][name] = {"description": WORKLOADS[name].description,
                                  "fields": [WORKLOADS[name].fields, 2 * WORKLOADS[name].fields],
                                  "runs": len(runs),
                                  "counts": counts,
                                  "functions": {f: round(table[f], 1) for f in top}}
    return out


@dataclasses.dataclass
class Move:
    workload: str
    count: str
    reference: float
    value: float
    tolerance: float
    grew: list[tuple[str, float]]

    @property
    def change(self) -> float:
        return (self.value - self.reference) / self.reference if self.reference else float("inf")

    def line(self) -> str:
        change = f"{self.change:+.2%}" if self.reference else "new"
        text = (f"{self.workload}: {self.count} per field {self.value:,.2f} against "
                f"{self.reference:,.2f} ({change}, band ±{self.tolerance:.2%})")
        if self.grew:
            text += "; grew: " + ", ".join(f"{f} {d:+,.0f}" for f, d in self.grew)
        return text


def within_band(reference: Mapping, value: float) -> bool:
    """Whether a count per field is within its reference's band; a count the reference shows
    without a band only has to be there. 1e-6: the digits the reference stores."""
    tol, expected = reference.get("tolerance"), reference["value"]
    if tol is None:
        return value >= 0
    if not expected:
        return abs(value) <= 1e-6
    return abs(value - expected) <= tol * expected + 1e-6


def compare(ref: Mapping, measured: Mapping[str, Measurement]) -> list[Move]:
    """The gated counts that moved beyond their band, either way (an improvement is
    re-recorded in the commit that made it, so the next regression is measured from it)."""
    moves = []
    for name, m in measured.items():
        entry = ref["workloads"].get(name)
        if entry is None:
            continue
        for count, r in entry["counts"].items():
            tol = r.get("tolerance")
            if tol is None:
                continue
            value = m.counts.get(count, 0.0)
            if not within_band(r, value):
                grew = growth(entry.get("functions", {}), m.functions) if count == "instructions" else []
                moves.append(Move(name, count, r["value"], value, tol, grew))
        calls = WORKLOADS[name].gated_calls if name in WORKLOADS else None
        for count, value in m.counts.items():
            if calls is not None and count.split(" ", 1)[-1] not in calls:
                continue
            if count not in entry["counts"] and value >= 1:   # a new kind of call, every field
                moves.append(Move(name, count, 0.0, value, 0.0, []))
    return moves


def growth(reference_functions: Mapping[str, float], now: Mapping[str, float],
           top: int = 3) -> list[tuple[str, float]]:
    """The functions whose instructions per field grew most (a function absent from the
    reference counts from 0); at most `top`, each at least 0.1% of the reference's total."""
    floor = 0.001 * sum(abs(v) for v in reference_functions.values())
    deltas = {f: v - reference_functions.get(f, 0.0) for f, v in now.items()}
    grown = sorted(((f, d) for f, d in deltas.items() if d > max(floor, 0.5)), key=lambda x: -x[1])
    return grown[:top]


def _version(cmd: list[str]) -> str | None:
    return process.capture(cmd).stdout.strip() or None


# --- where the programs come from ------------------------------------------------------------

def release_programs(tree: pathlib.Path, site: str) -> Programs:
    """fdb-archive-bench of a deployed release (its spack.lock names the prefix under the
    root's opt/), with FDB_ROOT for its schema; ecCodes' tools are the node's (a Debian
    external in every site that builds the stack)."""
    lock_file = tree / "spack.lock"
    if not lock_file.is_file():
        raise CountsError(f"no spack.lock in {tree}: not a deployed release")
    specs = json.loads(lock_file.read_text())["concrete_specs"]
    found = {}
    for h, s in specs.items():
        if s["name"] in ("fdb-archive-bench", "fdb", "eccodes", "netcdf-output-bench", "ior",
                         "nvme-stage", "multio", "openifs"):
            found[s["name"]] = (h, s)
    if "fdb-archive-bench" not in found:
        raise CountsError(f"{lock_file}: no fdb-archive-bench in the release")
    opt = tree.parent.parent / "opt" if (tree.parent.name == "releases") else tree / "opt"

    def prefix(name):
        h, s = found[name]
        if s.get("external"):
            return pathlib.Path(s["external"]["path"])
        return opt / f"{name}-{s['version']}-{h[:7]}"

    bench = prefix("fdb-archive-bench") / "bin" / "fdb-archive-bench"
    if not bench.is_file():
        raise CountsError(f"{bench}: not installed (the release's lock names it)")
    env = {"FDB_ROOT": str(prefix("fdb"))} if "fdb" in found else {}
    netcdf = None
    if "netcdf-output-bench" in found:
        netcdf = prefix("netcdf-output-bench") / "bin" / "netcdf-output-bench"
        if not netcdf.is_file():
            raise CountsError(f"{netcdf}: not installed (the release's lock names it)")
    ior = None
    if "ior" in found:
        ior = prefix("ior") / "bin"
        if not (ior / "ior").is_file():
            raise CountsError(f"{ior / 'ior'}: not installed (the release's lock names it)")
    nvme_stage = None
    if "nvme-stage" in found:
        nvme_stage = prefix("nvme-stage") / "bin" / "nvme-stage"
        if not nvme_stage.is_file():
            raise CountsError(f"{nvme_stage}: not installed (the release's lock names it)")
    multio = None
    if "multio" in found:
        multio = prefix("multio") / "bin" / "multio-hammer"
        if not multio.is_file():
            raise CountsError(f"{multio}: not installed (the release's lock names it)")
    openifs = None
    if "openifs" in found:
        openifs = prefix("openifs")
        if not list((openifs / "bin").glob("ifsMASTER.*")):
            raise CountsError(f"{openifs}/bin/ifsMASTER.*: not installed (the release's lock "
                              "names it)")
    build = {"site": site, "fdb-archive-bench": found["fdb-archive-bench"][0]}
    for name in ("fdb", "eccodes", "netcdf-output-bench", "ior", "nvme-stage", "multio",
                 "openifs"):
        if name in found:
            build[name] = f"{found[name][1]['version']}/{found[name][0][:7]}"
    return Programs(bench=bench, env=env, build=build, netcdf=netcdf, ior=ior,
                    nvme_stage=nvme_stage, multio=multio, openifs=openifs)


def reference_file(build: Mapping[str, str], directory: pathlib.Path = REFERENCES_DIR) -> pathlib.Path:
    return directory / f"{build['site']}-{build['fdb-archive-bench'][:7]}.yaml"


def load_reference(path: pathlib.Path, build: Mapping[str, str] | None = None) -> dict:
    if not path.is_file():
        raise CountsError(f"no count references at {path}: record them with `bin/iostack "
                          "counts record` (and commit the file)")
    ref = yaml.safe_load(path.read_text())
    if not isinstance(ref, dict) or "workloads" not in ref:
        raise CountsError(f"{path}: not a count reference (no workloads)")
    recorded, build = ref.get("build") or {}, build or {}
    for name in (n for n in recorded if n != "site" and n in build):
        if recorded[name] != build[name]:
            raise CountsError(f"{path} is for {name} {recorded[name]}, the release has "
                              f"{build[name]}: re-record (bin/iostack counts record)")
    return ref


def dump(ref: Mapping) -> str:
    return ("# Work counts per field of one build (bin/iostack counts record; "
            "iostack.regression.counts)\n" + yaml.safe_dump(dict(ref), sort_keys=False, width=100))


def record(programs: Programs, out: pathlib.Path, runs: int = 3,
           names: Sequence[str] | None = None, commit: str | None = None,
           keep: pathlib.Path | None = None) -> dict:
    if runs < 2:
        raise CountsError("--runs: at least 2, so that the spread is measured")
    results = []
    for i in range(runs):
        with _workdir(keep, f"record-{i}") as work:
            results.append(measure_all(programs, work, names))
    ref = reference(results, programs.build, commit, _version(["valgrind", "--version"]))
    if names and out.is_file():
        # only the named workloads re-recorded: the file's others stay as they were, and so
        # does the file's `recorded`, which is theirs; each re-recorded workload names its own
        # recording (its date, commit and valgrind), so every number names the code it came from
        old = load_reference(out, programs.build or None)
        ref["workloads"] = {**old["workloads"],
                            **{name: {**w, "recorded": ref["recorded"]}
                               for name, w in ref["workloads"].items()}}
        ref["recorded"] = old["recorded"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump(ref))
    return ref


def check(programs: Programs, ref: Mapping, names: Sequence[str] | None = None,
          keep: pathlib.Path | None = None) -> tuple[dict[str, Measurement], list[Move]]:
    # a site's environments share a build of fdb-archive-bench, so one reference file: each
    # counts what its release has (local/nwp's OpenIFS, which local lacks)
    names = names or [n for n in ref["workloads"] if n in WORKLOADS
                      and WORKLOADS[n].available(programs)]
    with _workdir(keep, "check") as work:
        measured = measure_all(programs, work, names)
    return measured, compare(ref, measured)


class _workdir:
    """A fresh directory /tmp/iostack-counts-NNNNNNNN, the lowest number free: its path is
    in FDB's TOC and index entries and in every field's location, so its length moves the
    counts (by hundreds of instructions a field, one character shorter), and so do its
    characters (FDB compares paths). Runs one after another get the same name; made here
    (0700), never taken over from someone else. Moved under `keep` afterwards if given."""

    def __init__(self, keep: pathlib.Path | None, label: str, parent: pathlib.Path = pathlib.Path("/tmp")):
        self.keep, self.label, self.parent = keep, label, parent

    def __enter__(self) -> pathlib.Path:
        for n in range(10_000):
            self.path = self.parent / f"iostack-counts-{n:08d}"
            try:
                self.path.mkdir(mode=0o700)
            except FileExistsError:
                continue
            try:
                pathlib.Path(f"{self.path}.tmp").mkdir(mode=0o700)   # alone_env()'s TMPDIR
                return self.path
            except FileExistsError:
                self.path.rmdir()
        raise CountsError(f"{self.parent}/iostack-counts-*: 10,000 taken; remove old ones")

    def __exit__(self, *exc):
        shutil.rmtree(f"{self.path}.tmp", ignore_errors=True)
        if self.keep:
            shutil.move(str(self.path), str(self.keep / f"{self.label}-{self.path.name}"))
        else:
            shutil.rmtree(self.path, ignore_errors=True)


def summary(measured: Mapping[str, Measurement]) -> list[str]:
    """A line per workload: its instructions, bytes, syncs and system calls per field."""
    lines = []
    for name, m in measured.items():
        shown = {k: v for k, v in m.counts.items() if not k.startswith("syscall ")}
        lines.append(f"{name}: " + ", ".join(f"{k} {v:,.2f}" for k, v in shown.items()))
    return lines


def as_json(reference_path: pathlib.Path, ref: Mapping, measured: Mapping[str, Measurement],
            moves: Sequence[Move]) -> dict:
    """A check's outcome as data: each workload's counts per field, which of them the
    reference gates, and every move with its line."""
    return {
        "reference": reference_path.name,
        "workloads": {name: {"counts": m.counts,
                             "gated": sorted(c for c, r in ref["workloads"].get(name, {}).get(
                                 "counts", {}).items() if r.get("tolerance") is not None)}
                      for name, m in measured.items()},
        "moves": [{"workload": m.workload, "count": m.count, "reference": m.reference,
                   "value": m.value, "tolerance": m.tolerance, "line": m.line()} for m in moves],
    }


def main(programs: Programs, action: str, reference_path: pathlib.Path, runs: int = 3,
         names: Sequence[str] | None = None, keep: pathlib.Path | None = None,
         commit: str | None = None, supersede: bool = False,
         json_out: pathlib.Path | None = None) -> int:
    """`bin/iostack counts record|check`: prints a line per workload; a failed check prints
    a line per count that moved and exits 1. A check writes what it measured and what moved
    to `json_out` too (the nightly's WorkCountsCheck reads it), whether it passes or not."""
    if action == "record":
        ref = record(programs, reference_path, runs, names, commit, keep)
        if supersede and programs.build.get("site"):
            # the site's references for an older build go: git shows the new file as the
            # old one renamed, with each count's change in its diff
            for older in reference_path.parent.glob(f"{programs.build['site']}-*.yaml"):
                if older != reference_path:
                    older.unlink()
                    log.info(f"{older.name} (an older build's) removed")
        for name, w in ref["workloads"].items():
            gated = sum(c["tolerance"] is not None for c in w["counts"].values())
            main = "instructions" if "instructions" in w["counts"] else "syscalls"
            c = w["counts"][main]
            log.info(f"{name}: {main} per field {c['value']:,.1f} (spread "
                     f"{c['spread']:.4%} over {w.get('runs', runs)} runs); {gated} of {len(w['counts'])} "
                     "counts gated", extra={"bare": True})
        log.info(f"count references written to {reference_path}")
        return 0
    ref = load_reference(reference_path, programs.build or None)
    measured, moves = check(programs, ref, names, keep)
    if json_out:
        json_out.write_text(json.dumps(as_json(reference_path, ref, measured, moves), indent=1))
    for line in summary(measured):
        log.info(line, extra={"bare": True})
    if moves:
        for move in moves:
            log.info(f"MOVED {move.line()}", extra={"bare": True})
        raise Failed(f"{len(moves)} work count(s) moved beyond their band against {reference_path}")
    log.info(f"work counts within their bands ({reference_path.name})")
    return 0
