"""Nightly tier: what takes longer than CI's budget, run by .github/workflows/nightly.yml
(`IOSTACK_TIER=nightly bin/iostack test tests/nightly`). It needs Spack and the offline
bundle as the Spack tier does, and skips nothing: a missing one fails."""
import os

import pytest

from iostack.spack import runner
from support import targets


@pytest.fixture(scope="session", autouse=True)
def _spack_required():
    try:
        runner.locate(targets.settings())
    except runner.SpackMissing as e:
        pytest.fail(f"the nightly tier needs Spack: {e}")
    os.environ.setdefault("IOSTACK_REQUIRE_SPACK", "1")
