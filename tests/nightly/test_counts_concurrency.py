"""Counted MPI programs at once on one node (iostack.regression.counts): a stress test, in
the nightly tier because it is a rate under load. Counted runs share a host name and a
process id (counts.isolated), which is how Open MPI names a singleton's session directory;
each run's own TMPDIR (counts.alone_env, asserted in tests/integration/test_counts.py)
keeps them apart."""
from __future__ import annotations

import pathlib
import shutil
import subprocess

import pytest

from iostack.regression import counts as counts_lib
# alive for a second, as a counted IOR is, so that the two overlap
SINGLETON = ("#include <mpi.h>\n#include <unistd.h>\n"
             "int main(int c, char **v) { MPI_Init(&c, &v); sleep(1); MPI_Finalize(); return 0; }\n")


@pytest.mark.skipif(not shutil.which("mpicc"), reason="no mpicc (libopenmpi-dev)")
def test_counted_mpi_singletons_at_once_each_start(tmp_path):
    """Counted runs share a host name and a process id (isolated()), which is how Open MPI
    names a singleton's session directory: without a TMPDIR of their own, two at once
    aborted in MPI_Init (2 of 6 pairs of `counts check` of IOR and mdtest)."""
    (tmp_path / "hello.c").write_text(SINGLETON)
    subprocess.run(["mpicc", "-o", tmp_path / "hello", tmp_path / "hello.c"], check=True)
    failed = []
    for pair in range(8):
        works = [tmp_path / f"w{pair}{k}" for k in "ab"]
        procs = []
        for work in works:
            work.mkdir()
            pathlib.Path(f"{work}.tmp").mkdir()
            env = counts_lib.alone_env(work)
            procs.append(subprocess.Popen(
                ["env", "-i", *(f"{k}={v}" for k, v in env.items()),
                 *counts_lib.isolated([str(tmp_path / "hello")])],
                cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        failed += [p.communicate(timeout=60)[0] for p in procs if p.wait(timeout=60) != 0]
    assert failed == []
