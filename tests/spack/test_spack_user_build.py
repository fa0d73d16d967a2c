"""A user's build against the deployed tree: `module load openmpi fdb`, then a small CMake
project (tests/data/user-build: find_package(fdb5), pkg-config for ecCodes) configured,
built, linked and run. Which FDB it linked is proven three ways: the version libfdb5
reports, the file the running process mapped (/proc/self/maps), and ldd. Without the
module the same project silently finds Debian's FDB 5.10.8 in /usr: the same assertions
name that."""
import os
import re
import shutil
import subprocess

import pytest

from iostack.core import paths

PROJECT = paths.REPO / "tests" / "data" / "user-build"


def fdb_problems(output: str, ldd: str, root) -> list[str]:
    """Why a build's run did not use the release's FDB 5.13.106 under `root`/opt."""
    problems = []
    version = re.search(r"^fdb5 version (\S+)$", output, re.M)
    if not version or version.group(1) != "5.13.106":
        problems.append(f"libfdb5 reports {version.group(1) if version else 'nothing'}")
    mapped = re.findall(r"^mapped (\S*/libfdb5\.so\S*)$", output, re.M)
    opt = f"{root}/opt/fdb-5.13.106-"
    if not mapped or not all(m.startswith(opt) for m in mapped):
        problems.append(f"the process mapped {mapped or 'no libfdb5'}, not {opt}*")
    linked = re.search(r"libfdb5\.so\S* => (\S+)", ldd)
    if not linked or not linked.group(1).startswith(opt):
        problems.append(f"ldd resolves libfdb5 to {linked.group(1) if linked else 'nothing'}")
    return problems


def build_and_run(tmp_path, root, modules: str):
    core = root / "current" / "modulefiles" / "Core"
    build = tmp_path / f"build-{modules.replace(' ', '-') or 'none'}"
    (tmp_path / "fdb-root").mkdir(exist_ok=True)
    config = tmp_path / "fdb-config.yaml"
    config.write_text(f"type: local\nengine: toc\nschema: /etc/fdb/schema\nspaces:\n- roots:\n"
                      f"  - path: {tmp_path / 'fdb-root'}\n")
    load = f"module use {core} && module load {modules} && " if modules else ""
    script = (f"source /usr/share/lmod/lmod/init/bash && {load}"
              f"cmake -S {PROJECT} -B {build} && cmake --build {build} && "
              f"FDB5_CONFIG_FILE={config} {build}/fdb-user-build && ldd {build}/fdb-user-build")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LMOD", "MODULE", "CMAKE_PREFIX_PATH", "PKG_CONFIG"))}
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)


@pytest.fixture(scope="module")
def deployed(local_deploy):
    if not shutil.which("cmake") or not os.path.exists("/usr/share/lmod/lmod/init/bash"):
        pytest.skip("cmake and Lmod needed (apt: cmake, lmod)")
    return local_deploy[0]


def test_a_user_build_with_the_fdb_module_links_the_release(deployed, tmp_path):
    p = build_and_run(tmp_path, deployed, "openmpi fdb")
    assert p.returncode == 0, p.stderr[-3000:]
    # CMake found the release's package, pkg-config Debian's ecCodes (a site external)
    assert re.search(rf"fdb-user-build: fdb5 5\.13\.106 from {deployed}/opt/fdb-5\.13\.106-"
                     r"\w+/lib\S*/cmake/fdb5", p.stdout), p.stdout
    assert "fdb-user-build: eccodes 2.28.0 " in p.stdout
    assert "fields listed 0" in p.stdout
    assert fdb_problems(p.stdout, p.stdout, deployed) == []
    eckit = re.findall(r"^mapped (\S*/libeckit\.so\S*)$", p.stdout, re.M)
    assert eckit and all(e.startswith(f"{deployed}/opt/eckit-1.28.8-") for e in eckit)


def test_without_the_module_debians_fdb_is_found_and_named(deployed, tmp_path):
    """What a user who forgets `module load fdb` gets: no error anywhere, Debian's FDB."""
    p = build_and_run(tmp_path, deployed, "")
    assert p.returncode == 0, p.stderr[-3000:]
    assert "fdb-user-build: fdb5 5.10.8 from /usr/lib/x86_64-linux-gnu/cmake/fdb5" in p.stdout
    assert fdb_problems(p.stdout, p.stdout, deployed) == [
        "libfdb5 reports 5.10.8",
        f"the process mapped ['/usr/lib/x86_64-linux-gnu/libfdb5.so.0d'], not "
        f"{deployed}/opt/fdb-5.13.106-*",
        "ldd resolves libfdb5 to /lib/x86_64-linux-gnu/libfdb5.so.0d"]
