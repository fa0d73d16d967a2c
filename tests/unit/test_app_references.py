"""The application checks' reference files, and the application features the ReFrame
configuration gives each site's environments against what the site's stack holds."""
import re

import pytest
import yaml

from iostack.core import paths
from support import rfm_config
from iostack.deployment import stack
from iostack.regression import references
from iostack.site.target import SpackEnv

REFS = references.REFERENCES_DIR
APP_REFERENCE_FILES = ["openifs.yaml", "io500.yaml", "ior_mdtest.yaml", "netcdf_output.yaml",
                       "openfoam_pitzdaily.yaml", "openfoam_motorbike.yaml"]


@pytest.mark.parametrize("name", APP_REFERENCE_FILES)
def test_reference_files_are_sound(name):
    data = yaml.safe_load((REFS / name).read_text())
    assert references.validate(data) == []
    for section in data.values():
        assert references.gated_variables(section), "a check with nothing gated"


def _config(monkeypatch, tmp_path):
    return rfm_config.load_all(tmp_path, offsite=True)


def test_oci_openfoam_expectations_name_what_the_checks_measure(monkeypatch, tmp_path):
    """The motorbike checks' documented findings can only be compared with a site's weekly
    results if each names perf variables the check reports, parameters it has and
    partitions that exist."""
    config = _config(monkeypatch, tmp_path)
    partitions = {f"{s['name']}:{p['name']}" for s in config["systems"] for p in s["partitions"]}
    check_source = (paths.REFRAME_DIR / "checks" / "openfoam_motorbike.py").read_text()
    data = yaml.safe_load((REFS / "openfoam_motorbike.yaml").read_text())
    found = 0
    for check, section in data.items():
        for e in section.get("expectations", []):
            found += 1
            variables = re.findall(r"[a-z]+(?:_[a-z]+)+", e["variable"])
            assert variables and set(variables) <= set(section["thresholds"]), e["what"]
            for key in ("variant", "baseline", "best", *(["among"] * ("among" in e))):
                for variant in ([e[key]] if isinstance(e.get(key), str) else e.get(key, [])):
                    params, _, partition = variant.partition(" @")
                    assert partition in partitions or not partition, variant
                    for name in dict(kv.split("=") for kv in params.split(",")):
                        assert re.search(rf"^    {name} = (parameter|variable)\(", check_source,
                                         re.M), (check, variant)
            assert -1 < e.get("change", 0) < 1
    assert found


# an application feature and the stack packages that provide it
FEATURE_PACKAGES = {"openifs": {"openifs"}, "openfoam": {"openfoam"}, "ior": {"ior"},
                    "io500": {"io500"}, "netcdf": {"netcdf-output-bench"},
                    "netcdf-output-bench": {"netcdf-output-bench"},
                    "fdb-archive-bench": {"fdb-archive-bench"}, "nvme-stage": {"nvme-stage"}}


@pytest.mark.parametrize("site", ["cray-ex", "oci-bm-optimized3"])
def test_cluster_environments_offer_exactly_the_applications_of_their_stack(
        site, monkeypatch, tmp_path):
    config = _config(monkeypatch, tmp_path)
    roots = {spec.name for spec in stack.roots_of(SpackEnv(site))}
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
    assert systems_with("openifs") == {"cray-ex", "setonix"}
    assert systems_with("openfoam") == {"oci-bm-optimized3", "local", "local-slurm",
                                        "local-cluster"}
    # IOR and io500 are Spack-built everywhere, the local site's too
    assert systems_with("io500") == {"cray-ex", "setonix", "oci-bm-optimized3", "local",
                                     "local-slurm"}
    assert systems_with("netcdf") == {"cray-ex", "setonix", "oci-bm-optimized3", "local",
                                      "local-slurm", "local-cluster"}
