"""The unit tier's way to run `bin/iostack`: its main() in this process, with the output
captured (no interpreter started, so what runs is this checkout's code, whatever venv)."""
from __future__ import annotations

import types

import pytest

from iostack import cli


@pytest.fixture
def iostack(capsys, monkeypatch):
    """iostack(*args, env={...}) -> (returncode, stdout, stderr) of `bin/iostack args`."""
    def run(*args, env=None):
        for key, value in (env or {}).items():
            monkeypatch.setenv(key, value)
        capsys.readouterr()
        try:
            rc = cli.main([str(a) for a in args])
        except SystemExit as e:         # argparse's own refusals
            rc = e.code
        out, err = capsys.readouterr()
        return types.SimpleNamespace(returncode=rc, stdout=out, stderr=err)
    return run
