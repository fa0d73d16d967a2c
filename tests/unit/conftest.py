"""The unit tier's way to run `bin/iostack`: its main() in this process, with the output
captured (no interpreter started, so what runs is this checkout's code, whatever venv)."""
from __future__ import annotations

import os
import types

import pytest

from iostack import cli


@pytest.fixture
def iostack(capsys):
    """iostack(*args, env={...}) -> (returncode, stdout, stderr) of `bin/iostack args`, with
    `env` on top of this process's environment (given to the CLI, never set here)."""
    def run(*args, env=None):
        capsys.readouterr()
        try:
            rc = cli.main([str(a) for a in args], environ={**os.environ, **(env or {})})
        except SystemExit as e:         # argparse's own refusals
            rc = e.code
        out, err = capsys.readouterr()
        return types.SimpleNamespace(returncode=rc, stdout=out, stderr=err)
    return run


@pytest.fixture(autouse=True)
def no_programs(monkeypatch, request):
    """The unit tier is pure Python: a test that starts a program fails, naming it. Only
    matplotlib's own font scan is let through: on a fresh HOME its first import asks
    fontconfig (`fc-list`) for the fonts it caches in ~/.cache/matplotlib."""
    import subprocess
    popen_init = subprocess.Popen.__init__

    def refuse(self, args, *a, **k):
        if isinstance(args, (list, tuple)) and args and args[0] == "fc-list":
            return popen_init(self, args, *a, **k)
        raise AssertionError(f"the unit tier runs no programs; {request.node.nodeid} ran {args!r}")
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse)
