"""What checks iostack did not write need from the ReFrame configuration (the integration
tests run them: tests/integration/test_reframe_foreign_checks.py): launchers that start
every rank, MPI compiler wrappers, processor info, the community's feature names, and a
configuration that loads without LMOD_CMD."""
import os

import pytest
from test_reframe_config import load_config, partition, systems

from iostack_rfm import launchers

LMOD_CMD = "/usr/share/lmod/lmod/libexec/lmod"


@pytest.fixture
def config(monkeypatch, tmp_path):
    monkeypatch.setenv("LMOD_CMD", LMOD_CMD)
    return load_config(monkeypatch, tmp_path)


def every_partition(config):
    return [(s["name"], p) for s in config["systems"] for p in s["partitions"]]


def test_mpi_partitions_launch_with_a_launcher_that_starts_ranks(config):
    for system, p in every_partition(config):
        if "mpi" in p["features"]:
            assert p["launcher"] in ("srun", "mpirun-ranks"), f"{system}:{p['name']}"


def test_the_local_launcher_starts_ranks_and_leaves_single_tasks_bare():
    class Job:
        num_tasks = 2
    assert launchers.MpirunRanksLauncher().command(Job()) == ["mpirun", "-np", "2"]
    Job.num_tasks = 1
    assert launchers.MpirunRanksLauncher().command(Job()) == []


def test_every_partition_describes_its_processor_and_is_a_cpu_partition(config):
    for system, p in every_partition(config):
        assert p["processor"]["num_cpus"] > 0, f"{system}:{p['name']}"
        assert "cpu" in p["features"], f"{system}:{p['name']}"
    local = partition(config, "local:default")
    assert local["processor"]["num_cpus"] == len(os.sched_getaffinity(0))
    assert partition(config, "local-slurm:default")["processor"] == local["processor"]
    assert local["extras"]["mem_per_node"] > 0


def test_local_environments_compile_with_mpi_wrappers_and_openmp(config):
    envs = {e["name"]: e for e in config["environments"]}
    for name in ("builtin", "stack"):
        env = envs[name]
        assert (env["cc"], env["cxx"], env["ftn"]) == ("mpicc", "mpicxx", "mpif90")
        assert {"mpi", "openmp"} <= set(env["features"])
        assert env["extras"]["omp_flag"] == "-fopenmp"
    for system in ("local", "local-slurm"):
        assert partition(config, f"{system}:default")["environs"][0] == "builtin"


def test_without_lmod_cmd_the_local_systems_use_no_modules(monkeypatch, tmp_path, capsys):
    monkeypatch.delenv("LMOD_CMD", raising=False)
    config = load_config(monkeypatch, tmp_path)
    for name in ("local", "local-slurm"):
        assert systems(config)[name]["modules_system"] == "nomod"
        # no Lmod set-up; the host slot (iostack_rfm.parsers.slots) stays
        assert [c for c in partition(config, f"{name}:default")["prepare_cmds"]
                if "LMOD_CMD" in c or "init/bash" in c] == []
    assert "source /usr/share/lmod/lmod/init/bash" in capsys.readouterr().err
