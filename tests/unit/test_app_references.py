"""The application checks' reference files, and the application features the ReFrame
configuration gives each site's environments against what the site's stack holds."""
import importlib.util
import pathlib

import pytest
import yaml

from iostack import paths
from iostack_rfm import references, stack

REFS = pathlib.Path(__file__).resolve().parents[2] / "reframe-tests" / "references"
APP_REFERENCE_FILES = ["openifs.yaml", "io500.yaml", "ior_mdtest.yaml", "netcdf_output.yaml",
                       "openfoam_pitzdaily.yaml", "openfoam_motorbike.yaml"]


@pytest.mark.parametrize("name", APP_REFERENCE_FILES)
def test_reference_files_are_sound(name):
    data = yaml.safe_load((REFS / name).read_text())
    assert references.validate(data) == []
    for section in data.values():
        assert references.gated_variables(section), "a check with nothing gated"


def _expectations(check):
    data = yaml.safe_load((REFS / "openfoam_motorbike.yaml").read_text())
    return {e["what"]: e for e in data[check]["expectations"]}


def test_seed_003_findings_are_documented_as_found():
    storage = _expectations("HpcMotorbikeStorageCheck")
    by_variable = {e["variable"]: e for e in storage.values()}
    assert by_variable["seconds_total"]["change"] == -0.262
    assert by_variable["seconds_solve"]["change"] == -0.404
    assert by_variable["seconds_decompose"]["change"] == -0.342
    rsync = [e for e in storage.values() if "seconds" in e]
    assert len(rsync) == 1 and rsync[0]["seconds"] == 46
    for e in storage.values():
        assert e["provenance"]["source"].startswith("seed 003, section 3")
    intra = _expectations("HpcMotorbikeIntraNodeCheck")
    nps = next(e for e in intra.values() if "change" in e)
    assert (nps["change"], nps["variant"], nps["baseline"]) == (
        -0.018, "ranks_per_node=36 @oci-bm-optimized3:nps2",
        "ranks_per_node=36 @oci-bm-optimized3:nps1")
    best = next(e for e in intra.values() if "best" in e)
    assert best["best"] == "ranks_per_node=36"
    inter = _expectations("HpcMotorbikeInterNodeCheck")
    assert next(e for e in inter.values() if "change" in e)["change"] == -0.013


def _config(monkeypatch, tmp_path):
    monkeypatch.setenv("IOSTACK_RFM_STATE", str(tmp_path))
    monkeypatch.setenv("IOSTACK_RFM_OFFSITE", "1")
    spec = importlib.util.spec_from_file_location("iostack_rfm_config", paths.REFRAME_CONFIG)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.site_configuration


# an application feature and the stack packages that provide it
FEATURE_PACKAGES = {"openifs": {"openifs"}, "openfoam": {"openfoam"}, "ior": {"ior"},
                    "io500": {"io500"}, "netcdf": {"netcdf-output-bench"},
                    "nvme-stage": {"nvme-stage"}}


@pytest.mark.parametrize("site", ["cray-ex", "oci-bm-optimized3"])
def test_cluster_environments_offer_exactly_the_applications_of_their_stack(
        site, monkeypatch, tmp_path):
    config = _config(monkeypatch, tmp_path)
    roots = {spec.name for spec in stack.site_roots(site)}
    offered = set()
    for env in config["environments"]:
        if site not in env.get("target_systems", []):
            continue
        features = set(env["features"]) & set(FEATURE_PACKAGES)
        offered |= features
        for feature in features:
            assert FEATURE_PACKAGES[feature] <= roots, (env["name"], feature)
            # on a cluster an application comes from a module
            assert env["extras"]["app_modules"][feature], (env["name"], feature)
    # every application the stack has is offered by some environment
    assert offered == {f for f, pkgs in FEATURE_PACKAGES.items() if pkgs <= roots}


def test_where_each_application_runs(monkeypatch, tmp_path):
    config = _config(monkeypatch, tmp_path)

    def systems_with(feature):
        return {s for env in config["environments"] if feature in env["features"]
                for s in env["target_systems"]}

    # OpenIFS is in the Cray site's stack only, OpenFOAM in OCI's and Debian's
    assert systems_with("openifs") == {"cray-ex"}
    assert systems_with("openfoam") == {"oci-bm-optimized3", "local", "local-slurm"}
    assert systems_with("io500") == {"cray-ex", "oci-bm-optimized3"}
    assert systems_with("netcdf") == {"cray-ex", "oci-bm-optimized3", "local", "local-slurm"}
