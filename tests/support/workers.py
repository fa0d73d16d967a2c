"""How the suite is spread over pytest-xdist's workers (pytest.ini: `-n 2 --dist loadscope`).

A few session fixtures cost minutes: a source deploy of `local`, its build cache, a fresh
Debian root set up from the offline bundle. A worker makes its own copy of a session
fixture, so every module that uses one of them runs on one worker, as one unit of work
(SHARED_GROUP); every other module is a unit of its own, so its module fixtures are made
once too. The shared group is collected first, so one worker starts on it at once while
the other works through the remaining modules; the first joins it when the group is done.

The scheduler runs in xdist's controller, which collects nothing and sees only node ids, so
the shared modules are named here. tests/integration/test_workers.py collects the suite and
fails, naming the module, when the list and the fixtures the tests use differ.
"""
from __future__ import annotations

SHARED_FIXTURES = frozenset({"local_deploy", "local_buildcache", "fresh_bookworm_node"})
SHARED_GROUP = "shared-roots"
SHARED_MODULES = frozenset({
    "tests/integration/test_fresh_node.py",
    "tests/spack/test_spack_counts.py",
    "tests/spack/test_spack_local.py",
    "tests/spack/test_spack_meta_modules.py",
    "tests/spack/test_spack_multio.py",
    "tests/spack/test_spack_netcdf_slurm.py",
    "tests/spack/test_spack_offline.py",
    "tests/spack/test_spack_release_guide.py",
    "tests/spack/test_spack_sbom_image.py",
    "tests/spack/test_spack_user_build.py",
    "tests/spack/test_spack_user_upstream.py",
})


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: the shared group, or its module."""
    module = module_of(nodeid)
    return SHARED_GROUP if module in SHARED_MODULES else module


def shared_modules_used(items) -> set[str]:
    """The modules of `items` whose tests use a shared session fixture."""
    return {module_of(item.nodeid) for item in items
            if SHARED_FIXTURES & set(getattr(item, "fixturenames", ()))}


def stale(items) -> str | None:
    """What SHARED_MODULES lacks or has too many, for the collected `items`; None if nothing."""
    collected = {module_of(item.nodeid) for item in items}
    used = shared_modules_used(items)
    if used == SHARED_MODULES & collected:
        return None
    missing = ", ".join(sorted(used - SHARED_MODULES)) or "none"
    extra = ", ".join(sorted((SHARED_MODULES & collected) - used)) or "none"
    return f"tests/support/workers.py SHARED_MODULES is stale: add {missing}; remove {extra}"


def order(items: list) -> None:
    """In a worker: the shared group first (the controller hands out units in this order)."""
    items.sort(key=lambda item: unit_of(item.nodeid) != SHARED_GROUP)


def pytest_collection_finish(session):
    """As a plugin (`-p support.workers`, with WORKERS_STALE naming a file): write there what
    stale() says of the collected suite."""
    import os
    import pathlib

    if os.environ.get("WORKERS_STALE"):
        pathlib.Path(os.environ["WORKERS_STALE"]).write_text(stale(session.items) or "")


def SharedRootScheduling(config, log):  # noqa: N802 (a class, made where xdist is loaded)
    from xdist.scheduler import LoadScopeScheduling

    class _SharedRootScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    return _SharedRootScheduling(config, log)
