"""What bin/iostack tells a ReFrame run, read here for the configuration and the checks: the
variables of iostack.core.settings.CHILD_VARIABLES, each with its one meaning. Run by hand
(`reframe -C ...` without bin/iostack), a run gets a checkout's defaults: state in
reframe-tests/output, no release (the committed locks), the committed references.

The site a check runs for is its partition's `site` extra, which the configuration writes
from the site's facts: nothing scans facts files to find it.
"""
from __future__ import annotations

import os
import pathlib

from iostack.core import paths
from iostack.core.settings import Settings


def _path(name: str) -> pathlib.Path | None:
    value = os.environ.get(name)
    return pathlib.Path(value) if value else None


def settings() -> Settings:
    """The run's settings, as bin/iostack passed them (references, samples, cache)."""
    return Settings.from_environ(os.environ)


def state() -> pathlib.Path:
    """Where ReFrame writes its stage, output, perflogs, reports and (by default) results DB."""
    return _path('IOSTACK_RFM_STATE') or paths.REFRAME_DIR / 'output'


def release() -> pathlib.Path | None:
    """The release under test (or a root without releases); None: nothing deployed named."""
    return _path('IOSTACK_RELEASE')


def root() -> pathlib.Path | None:
    """The deployment the release belongs to (its install tree <root>/opt, <root>/var)."""
    return _path('IOSTACK_ROOT')


def release_lock() -> pathlib.Path | None:
    """The spack.lock the release under test was built from, None without one (then a
    site's committed lock is the stack)."""
    tree = release()
    lock = tree / 'spack.lock' if tree else None
    return lock if lock is not None and lock.is_file() else None


def release_env() -> str | None:
    """The Spack environment the release under test was built in (its release.json `env`:
    `local/nwp`), None for a root without releases (the site's default)."""
    import json

    tree = release()
    meta = tree / 'release.json' if tree else None
    if meta is None or not meta.is_file():
        return None
    return json.loads(meta.read_text()).get('env')


#: the nodes the nightly's health gate drained (iostack.regression.nightly.DRAINED_ENV)
DRAINED_ENV = 'IOSTACK_DRAINED_NODES'


def drained_nodes() -> str:
    """The nodes the health gate kept off the performance checks, as Slurm's --exclude
    takes them ('' for none)."""
    return os.environ.get(DRAINED_ENV, '')


def site_of(partition) -> str:
    """The site of a ReFrame partition (its `site` extra)."""
    return partition.extras['site']


def site_of_system(system) -> str:
    """The site of a ReFrame system (every partition of a system is the same site's)."""
    return site_of(system.partitions[0])


def node_override() -> str | None:
    """The node a test plays (IOSTACK_NODE, iostack.regression.node): None in real runs."""
    return os.environ.get('IOSTACK_NODE') or None
