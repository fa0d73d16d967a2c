"""Every ReFrame command README.md and reframe-tests/README.md show, run as printed, in a
shell a new user has: only the venv's tools and the system's on PATH, Lmod initialised as
the README says, nothing of bin/iostack's set. (The local-cluster one runs on the cluster
test bed: tests/integration/test_cluster.py.)"""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from iostack.core import paths

LMOD_INIT = "/usr/share/lmod/lmod/init/bash"


def shown(readme: str) -> list[str]:
    """The ReFrame command lines of a README's shell blocks, with their continuations."""
    text = (paths.REPO / readme).read_text()
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for command in re.split(r"(?<!\\)\n", block.strip()):
            line = command.replace("\\\n", " ")
            if re.search(r"(^|/| )reframe -C ", line) and "local-cluster" not in line:
                commands.append(line.split("  #")[0].strip())
    return commands


def user_shell(script: str, tmp_path, **env) -> subprocess.CompletedProcess:
    venv = paths.REPO / ".venv"
    clean = {"HOME": str(tmp_path), "LANG": "C.UTF-8",
             "PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", **env}
    return subprocess.run(["bash", "-c", script], cwd=paths.REPO, env=clean,
                          capture_output=True, text=True, timeout=900)


def test_the_readmes_show_commands_to_run():
    assert len(shown("README.md")) == 2 and len(shown("reframe-tests/README.md")) == 2


@pytest.mark.parametrize("command", shown("README.md"))
def test_readme_reframe_commands_run_as_printed(command, tmp_path):
    if not os.path.exists(LMOD_INIT):
        pytest.skip("Lmod not installed")
    p = user_shell(f". .venv/bin/activate && . {LMOD_INIT}\n{command}", tmp_path)
    out = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout + p.stderr)
    assert p.returncode == 0, out[-3000:]
    assert "ERROR" not in out, out[-3000:]
    if " -l" in command:
        assert re.search(r"Found (\d+) check\(s\)", out) and "- StackSmokeCheck" in out, out[-2000:]
    else:
        ran = re.search(r"\[ +PASSED +\] Ran (\d+)/\d+ test case", out)
        assert ran and int(ran.group(1)) > 0, out[-2000:]     # ReFrame passes 0 of 0


@pytest.mark.parametrize("command", shown("reframe-tests/README.md"))
def test_reframe_readme_results_commands_run_as_printed(command, tmp_path):
    """Its ReFrame's own tools on the results DB, with IOSTACK_RFM_STATE as it says."""
    state = tmp_path / "reframe"
    p = user_shell(command, tmp_path, IOSTACK_RFM_STATE=str(state),
                   LMOD_CMD="/usr/share/lmod/lmod/libexec/lmod")
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert "could not load" not in p.stdout + p.stderr
