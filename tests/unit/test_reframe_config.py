"""The ReFrame configuration: every site is a system, partitions carry the features the
checks select on, the nightly/weekly modes and the results DB are set up."""
import importlib.util

import pytest

from iostack import paths


def load_config(monkeypatch, tmp_path, offsite=False):
    monkeypatch.setenv("IOSTACK_RFM_STATE", str(tmp_path))
    if offsite:
        monkeypatch.setenv("IOSTACK_RFM_OFFSITE", "1")
    else:
        monkeypatch.delenv("IOSTACK_RFM_OFFSITE", raising=False)
    spec = importlib.util.spec_from_file_location("iostack_rfm_config", paths.REFRAME_CONFIG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


@pytest.fixture
def config(monkeypatch, tmp_path):
    return load_config(monkeypatch, tmp_path)


def systems(config):
    return {s["name"]: s for s in config["systems"]}


def partition(config, fullname):
    system, part = fullname.split(":")
    return next(p for p in systems(config)[system]["partitions"] if p["name"] == part)


def test_the_sites_and_local_slurm_are_systems(config):
    assert set(systems(config)) == {"local", "local-slurm", "cray-ex", "oci-bm-optimized3"}


def test_local_slurm_uses_squeue_and_srun(config):
    p = partition(config, "local-slurm:default")
    assert (p["scheduler"], p["launcher"]) == ("squeue", "srun")
    assert "--partition=iostack" in p["access"]


def test_every_partition_can_run_the_fdb_checks_in_a_stack_environment(config):
    envs = {e["name"]: e for e in config["environments"]}
    for system in config["systems"]:
        for p in system["partitions"]:
            assert {"fdb", "grib"} <= set(p["features"]), p["name"]
            for env in p["environs"]:
                assert system["name"] in envs[env]["target_systems"]
            assert any({"stack", "fdb"} <= set(envs[env]["features"]) for env in p["environs"])


def test_io_size_feature_splits_ci_nodes_from_clusters(config):
    assert "small-io" in partition(config, "local:default")["features"]
    assert "small-io" in partition(config, "local-slurm:default")["features"]
    for name in ("cray-ex:compute", "cray-ex:serial", "oci-bm-optimized3:nps1",
                 "oci-bm-optimized3:nps2"):
        assert "small-io" not in partition(config, name)["features"]


def test_cray_ex_compute_and_its_programming_environments(config):
    p = partition(config, "cray-ex:compute")
    assert p["scheduler"] == "slurm" and p["launcher"] == "srun"
    assert {"fdb", "grib", "lustre", "mpi"} <= set(p["features"])
    assert p["access"] == ["--partition=standard", "--qos=standard"]
    assert set(p["environs"]) == {"PrgEnv-cray", "PrgEnv-gnu"}
    envs = {e["name"]: e for e in config["environments"]}
    for name in ("PrgEnv-cray", "PrgEnv-gnu"):
        assert envs[name]["modules"][0] == name
        assert {"eccodes", "fdb"} <= set(envs[name]["modules"])
        assert (envs[name]["cc"], envs[name]["cxx"], envs[name]["ftn"]) == ("cc", "CC", "ftn")


def test_oci_binds_as_seed_003_says(config):
    nps1 = partition(config, "oci-bm-optimized3:nps1")
    nps2 = partition(config, "oci-bm-optimized3:nps2")
    assert nps1["extras"]["launcher_options"] == ["--cpu-bind=cores", "--distribution=block:cyclic"]
    assert nps2["extras"]["launcher_options"] == ["--cpu-bind=rank_ldom",
                                                  "--distribution=block:cyclic"]
    assert {"nvme", "nps1"} <= set(nps1["features"]) and "nps2" in nps2["features"]
    for p in (nps1, nps2):
        assert p["processor"]["num_cpus"] == 36 and p["processor"]["num_sockets"] == 2


def test_modes_retry_and_write_junit(config, tmp_path):
    modes = {m["name"]: m["options"] for m in config["modes"]}
    assert set(modes) == {"nightly", "weekly"}
    for name, options in modes.items():
        assert any(o.startswith("--max-retries=") for o in options)
        assert f"--report-junit={tmp_path}/reports/junit-{name}.xml" in options
    assert "--tag=nightly" in modes["nightly"]


def test_results_db_lives_in_the_state_directory(config, tmp_path):
    (storage,) = config["storage"]
    assert storage["enable"] is True
    assert storage["sqlite_db_file"] == f"{tmp_path}/results.db"
    assert config["general"][0]["report_file"].startswith(f"{tmp_path}/reports/")


def test_offsite_switches_only_the_real_sites_to_nomod(monkeypatch, tmp_path):
    monkeypatch.setenv("LMOD_CMD", "/usr/share/lmod/lmod/libexec/lmod")
    on_site = systems(load_config(monkeypatch, tmp_path))
    off_site = systems(load_config(monkeypatch, tmp_path, offsite=True))
    for name in ("cray-ex", "oci-bm-optimized3"):
        assert on_site[name]["modules_system"] == "lmod"
        assert off_site[name]["modules_system"] == "nomod"
    for name in ("local", "local-slurm"):
        assert off_site[name]["modules_system"] == "lmod"
