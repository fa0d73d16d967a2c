"""With real Spack: every local recipe concretizes with its main variants, and the
applications concretize for the cluster sites."""
import subprocess

import pytest

from iostack import paths


def spack_spec(site, spec, tmp_path):
    p = subprocess.run([str(paths.REPO / "bin" / "iostack"), "spack", "--site", site, "--root",
                        str(tmp_path), "--", "spec", "-I", *spec.split()],
                       capture_output=True, text=True, timeout=1200)
    print(p.stdout[-5000:], p.stderr[-3000:])
    return p


# (site, spec): each recipe of ours with its main variants, where it is meant to build.
SPECS = [
    ("cray-ex", "openifs precision=single +fdb craype=cce os=sles15 %cce"),
    ("cray-ex", "openifs precision=double ~fdb craype=gnu os=sles15 %gcc"),
    ("cray-ex", "io500 os=sles15 %gcc"),
    ("cray-ex", "fdb backends=lustre craype=cce os=sles15 %cce"),
    ("cray-ex", "nwp-env os=sles15"),
    ("oci-bm-optimized3", "openifs os=ol8"),
    ("oci-bm-optimized3", "io500 os=ol8"),
    ("oci-bm-optimized3", "cfd-env os=ol8"),
    ("local", "netcdf-output-bench"),
    ("local", "nvme-stage"),
]


@pytest.mark.parametrize("site,spec", SPECS, ids=[f"{s}:{p.split()[0]}" for s, p in SPECS])
def test_spec_concretizes(site, spec, tmp_path):
    p = spack_spec(site, spec, tmp_path)
    assert p.returncode == 0
    name = spec.split()[0]
    assert f" {name}@" in p.stdout or p.stdout.lstrip("[-+e] ").startswith(f"{name}@") or f"  {name}@" in p.stdout


def test_openfoam_with_cce_is_refused_with_a_pointer_to_prgenv_gnu(tmp_path):
    p = spack_spec("cray-ex", "openfoam os=sles15 %cce", tmp_path)
    assert p.returncode != 0
    assert "PrgEnv-gnu" in p.stdout + p.stderr
