"""The repository's own linters: yamllint, ruff, shellcheck, luacheck, actionlint."""
import os
import shutil
import subprocess

import pytest

from iostack.core import paths


def run(cmd):
    p = subprocess.run(cmd, cwd=paths.REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def tracked(*patterns):
    out = subprocess.run(["git", "ls-files", *patterns], cwd=paths.REPO, capture_output=True,
                         text=True).stdout.split()
    return [f for f in out if (paths.REPO / f).exists()]


def test_yamllint(venv_bin):
    run([str(venv_bin / "yamllint"), "-s", "-c", ".yamllint", "."])


def test_ruff(venv_bin):
    run([str(venv_bin / "ruff"), "check", "."])


@pytest.mark.parametrize("call", ["subprocess.run(['true'])", "subprocess.Popen(['true'])",
                                  "subprocess.check_output(['true'])", "os.system('true')"])
def test_ruff_refuses_a_command_that_bypasses_the_process_layer(venv_bin, call):
    """Library code starts commands only through iostack.core.process, which prints them."""
    p = subprocess.run([str(venv_bin / "ruff"), "check", "--no-cache", "--stdin-filename",
                        "lib/iostack/deployment/probe.py"], input=f"import os\nimport subprocess\n\n{call}\n",
                       cwd=paths.REPO, capture_output=True, text=True)
    assert p.returncode == 1 and "TID251" in p.stdout and "iostack.core.process" in p.stdout


def test_shellcheck():
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck not installed (apt: shellcheck)")
    # Ansible's Jinja templates (*.j2) are shell only once rendered
    scripts = [f for f in tracked() if (paths.REPO / f).is_file() and not f.endswith(".j2")
               and (paths.REPO / f).read_bytes()[:32].startswith((b"#!/bin/sh", b"#!/bin/bash",
                                                                   b"#!/usr/bin/env bash"))]
    assert "bin/iostack" in scripts and ".ci/run" in scripts
    run(["shellcheck", *scripts])


def test_luacheck_and_lmod_syntax():
    lua = tracked("modulefiles/*.lua", "modulefiles/**/*.lua")
    if not lua:
        pytest.skip("no hand-written modulefiles yet")
    if not shutil.which("luacheck"):
        pytest.skip("luacheck not installed (apt: lua-check)")
    run(["luacheck", "--config", "modulefiles/.luacheckrc", *lua])


def test_actionlint(venv_bin):
    exe = shutil.which("actionlint") or (venv_bin / "actionlint")
    if not shutil.which(str(exe)):
        # set-up installs it with Go (the Go module proxy); CI's machines have Go, so there
        # a missing actionlint is a failure, never a skip
        reason = "actionlint not installed (bin/iostack setup installs it with Go)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    run([str(exe), "-shellcheck=" + (shutil.which("shellcheck") or "")])


def test_zizmor_finds_nothing_in_the_workflows(venv_bin):
    """The workflow security linter, offline (no GitHub API): pinned actions, no persisted
    checkout credentials, no template injection, least permissions."""
    run([str(venv_bin / "zizmor"), "--offline", "--no-progress", ".github/workflows"])
