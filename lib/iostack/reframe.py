"""Run a site's ReFrame regression with the repository's configuration."""
import os
import pathlib
import shutil

from iostack import paths
from iostack.run import die, run

LMOD_CMD_DEFAULTS = ("/usr/share/lmod/lmod/libexec/lmod", "/opt/lmod/lmod/libexec/lmod")


def lmod_cmd():
    if os.environ.get("LMOD_CMD"):
        return os.environ["LMOD_CMD"]
    for c in LMOD_CMD_DEFAULTS:
        if os.path.exists(c):
            return c
    die("Lmod not found: install it (Debian: apt-get install lmod) or set LMOD_CMD")


def environment(root_dir: pathlib.Path) -> dict:
    modulepath = str(root_dir / "modulefiles" / "Core")
    if os.environ.get("MODULEPATH"):
        modulepath += ":" + os.environ["MODULEPATH"]
    return {
        "LMOD_CMD": lmod_cmd(),
        "MODULEPATH": modulepath,
        "IOSTACK_RFM_STATE": root_dir / "reframe",
        # the deployment the checks test (the smoke check looks for its module tree)
        "IOSTACK_ROOT": root_dir,
    }


def reframe(system: str, root_dir: pathlib.Path, extra=(), mode=None, env_extra=None):
    exe = paths.venv() / "bin" / "reframe"
    if not exe.exists():
        exe = shutil.which("reframe") or die("ReFrame not found: run bin/iostack setup")
    state = root_dir / "reframe"
    state.mkdir(parents=True, exist_ok=True)
    cmd = [exe, "-C", paths.REFRAME_CONFIG, "--system", system, "--prefix", state]
    if mode:
        cmd += ["--mode", mode]
    cmd += ["-r", *extra]
    proc = run(cmd, env_extra={**environment(root_dir), **(env_extra or {})}, check=False)
    from iostack import results

    reports = results.run_reports(state)
    if reports:
        print(f"iostack: ReFrame report: {reports[-1]}")
    return proc.returncode
