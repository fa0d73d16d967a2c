"""Spack tier: runs only where the pinned Spack is available (see bin/iostack setup)."""
import pytest

from iostack import spack


@pytest.fixture(scope="session")
def spack_available():
    try:
        return spack.locate()
    except spack.SpackMissing as e:
        pytest.skip(f"Spack tier skipped: {e}")


@pytest.fixture(autouse=True)
def _needs_spack(spack_available):
    return spack_available
