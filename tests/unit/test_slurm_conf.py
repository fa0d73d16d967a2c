"""The single-node Slurm harness writes a slurm.conf that Slurm 22.05 accepts for this node,
and refuses what it cannot run, before starting anything."""
import os

import pytest

from iostack_testbed import slurm

HARDWARE = {"NodeName": "vm", "CPUs": "2", "Boards": "1", "SocketsPerBoard": "1",
            "CoresPerSocket": "2", "ThreadsPerCore": "1", "RealMemory": "24105"}


def conf_lines(tmp_path):
    text = slurm.slurm_conf(tmp_path, HARDWARE, tmp_path / "munge/munge.socket", 7001, 7002)
    return {line.split("=", 1)[0]: line.split("=", 1)[1] for line in text.splitlines()
            if line and not line.startswith("#") and not line.startswith(("NodeName", "Partition"))}, text


def test_conf_is_for_this_node_without_cgroups_or_accounting(tmp_path):
    keys, text = conf_lines(tmp_path)
    assert keys["SlurmctldHost"] == "vm(127.0.0.1)"
    assert keys["ProctrackType"] == "proctrack/linuxproc"
    assert keys["TaskPlugin"] in ("task/none", "task/affinity")
    assert keys["SelectType"] == "select/cons_tres"
    assert keys["AccountingStorageType"] == "accounting_storage/none"
    assert keys["AuthInfo"] == f"socket={tmp_path / 'munge/munge.socket'}"
    assert (keys["SlurmctldPort"], keys["SlurmdPort"]) == ("7001", "7002")
    # srun without --mpi starts Open MPI ranks (PMIx), as on any site's Slurm
    assert keys["MpiDefault"] == "pmix"
    # every state, spool and log path is under the state directory
    for key in ("StateSaveLocation", "SlurmdSpoolDir", "SlurmctldLogFile", "SlurmdLogFile",
                "SlurmctldPidFile", "SlurmdPidFile", "PlugStackConfig"):
        assert keys[key].startswith(str(tmp_path)), key


def test_node_line_is_what_slurmd_reports(tmp_path):
    _, text = conf_lines(tmp_path)
    node = next(line for line in text.splitlines() if line.startswith("NodeName="))
    # Slurm drains a node configured with more CPUs or memory than it has: slurmd -C's values
    assert node.startswith("NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 "
                           "ThreadsPerCore=1 RealMemory=24105")
    part = next(line for line in text.splitlines() if line.startswith("PartitionName="))
    assert part.startswith(f"PartitionName={slurm.PARTITION} Nodes=vm Default=YES")


def test_write_config_creates_a_private_munge_key(tmp_path, monkeypatch):
    monkeypatch.setattr(slurm, "node_hardware", lambda: dict(HARDWARE))
    cluster = slurm.LocalSlurm(tmp_path / "s")
    conf = cluster.write_config()
    assert conf.is_file() and cluster.env() == {"SLURM_CONF": str(conf)}
    assert oct(cluster.munge_key.stat().st_mode & 0o777) == "0o400"
    assert len(cluster.munge_key.read_bytes()) >= 32
    assert oct(cluster.munge_dir.stat().st_mode & 0o777) == "0o755"
    key = cluster.munge_key.read_bytes()
    cluster.write_config()  # a second write keeps the key
    assert cluster.munge_key.read_bytes() == key


def test_too_long_a_state_dir_is_refused_with_the_reason(tmp_path, monkeypatch):
    monkeypatch.setattr(slurm, "node_hardware", lambda: dict(HARDWARE))
    cluster = slurm.LocalSlurm(tmp_path / ("d" * 120))
    with pytest.raises(slurm.SlurmStartError, match="too long for munge's socket"):
        cluster.write_config()


def test_not_root_is_a_reason_not_to_start(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert "root" in slurm.unavailable_reason()
    with pytest.raises(slurm.SlurmUnavailable):
        slurm.LocalSlurm("/nonexistent").start()


def test_diagnostics_show_the_log_tails(tmp_path):
    cluster = slurm.LocalSlurm(tmp_path)
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "slurmctld.log").write_text("\n".join(f"line {i}" for i in range(100)))
    text = cluster.diagnostics(lines=5)
    assert "slurmctld.log" in text and "line 99" in text and "line 94" not in text


def test_a_state_dir_too_long_for_slurmstepds_sockets_is_refused(tmp_path, monkeypatch):
    """slurmstepd makes <spool>/<node>_<job>.<step> sockets: a path beyond sun_path's 107
    bytes made it die at every job, and slurmctld requeued the job for ever (a nightly
    hung 600 s in CI); refused up front instead, naming the reason."""
    monkeypatch.setattr(slurm, "node_hardware", lambda: dict(HARDWARE))
    state = tmp_path / ("d" * (85 - len(str(tmp_path)) - 1))
    cluster = slurm.LocalSlurm(state)
    assert len(str(cluster.munge_socket)) <= slurm.MAX_SOCKET_PATH
    with pytest.raises(slurm.SlurmStartError, match="too long for slurmstepd's socket paths"):
        cluster.write_config()
