"""Session fixtures more than one tier uses (tests/conftest.py loads them)."""
from __future__ import annotations

import os
import pathlib
import time

import pytest

from iostack.core import paths
from iostack.offline import bundle
from support import debian_root


def shared_bundle() -> pathlib.Path:
    """The offline bundle CI gets (../shared/spack), or where IOSTACK_SPACK_BUNDLE says;
    without one, the test skips, or fails where IOSTACK_REQUIRE_SPACK says it must run."""
    where = pathlib.Path(os.environ.get("IOSTACK_SPACK_BUNDLE")
                         or paths.REPO.parent / "shared" / "spack")
    if not (where / bundle.SUMS).is_file():
        message = f"no offline Spack bundle at {where} (set IOSTACK_SPACK_BUNDLE)"
        if os.environ.get("IOSTACK_REQUIRE_SPACK"):
            pytest.fail(message)
        pytest.skip(message)
    return where.resolve()


@pytest.fixture(scope="session")
def offline_bundle() -> pathlib.Path:
    return shared_bundle()


@pytest.fixture(scope="session")
def fresh_bookworm_node(tmp_path_factory, offline_bundle, timings):
    """A fresh Debian 12 root set up as the README says, from the offline bundle:
    (root, the set-up's Run)."""
    root = debian_root.DebianRoot("bookworm", tmp_path_factory.mktemp("fresh-node"))
    root.copy_repository()
    root.bind(offline_bundle, debian_root.BUNDLE_IN_ROOT, read_only=True)
    start = time.monotonic()
    run = root.run(["bin/iostack", "setup", "--spack-bundle", debian_root.BUNDLE_IN_ROOT])
    timings["fresh node: set-up (Debian 12 minbase, offline bundle)"] = time.monotonic() - start
    yield root, run
    root.remove()
