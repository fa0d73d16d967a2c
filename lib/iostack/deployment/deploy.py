"""`bin/iostack deploy`: build a site's stack as a new release of a deployment root, run its
regression on it, and make it current only if that passes (lib/iostack/deployment/releases.py).

Order, so that a bad input stops the deploy before anything is installed:
1. a new release <root>/releases/<id> (the commit and lock it is built from);
2. concretize (the committed spack.lock) in the release's own copy of the environment;
3. from sources: fetch every source first, checksums verified (`spack fetch --missing`);
   from a build cache (--buildcache): install from it only, signed by keys this node trusts;
4. install into the deployment's one install tree, then generate the release's Lmod tree,
   meta-modules, FDB config and Lmod spider cache;
5. the site's nightly regression on the release (unless --skip-regression);
6. `current` moves to the release if the regression passed (unless --no-switch).
A release that fails a step keeps its verdict (`build failed`, `failed`) and is never current.
"""
from __future__ import annotations

import pathlib
import shutil
from collections.abc import Callable

from iostack.core import paths, process, provenance
from iostack.core.errors import Failed, IostackError
from iostack.deployment import fdbconfig, lmodcache, releases, roots
from iostack.spack import config, runner


def install_meta_modules(root_dir):
    """Hand-written meta-modules go beside Spack's Core modules, after Spack's refresh."""
    core = root_dir / "modulefiles" / "Core"
    core.mkdir(parents=True, exist_ok=True)
    installed = []
    for src in sorted(paths.META_MODULES.iterdir()):
        if src.is_dir() and any(src.glob("*.lua")):
            dest = core / src.name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(src, dest, symlinks=True)
            installed.append(src.name)
    if installed:
        print(f"iostack: meta-modules installed in {core}: {', '.join(installed)}")


def render_fdb_config(root_dir, fdb_root=None):
    """The FDB config openifs-env points FDB5_CONFIG_FILE at: root `fdb_root` (default
    <root_dir>/var/fdb; a release's is the deployment's, as data outlive releases), schema
    of the FDB in use (FDB5_SCHEMA, $FDB_ROOT/etc/fdb/schema or /etc/fdb/schema)."""
    out = root_dir / "etc" / "fdb5" / "config.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        fdbconfig.write(fdb_root or root_dir / "var" / "fdb", out)
    except FileNotFoundError:
        print("iostack: note: no FDB schema found, so no FDB config written; set FDB5_SCHEMA")
        return
    print(f"iostack: FDB config: {out}")


def use_buildcache(root: pathlib.Path, cache_dir: pathlib.Path) -> None:
    """Record the build cache for this deployment (spack-env/common/mirrors.yaml includes
    <root>/spack-config/mirrors.yaml). Its signatures are checked against the keys this node
    already trusts, never against keys the cache itself ships: whoever can write the cache
    could ship theirs."""
    config.write_mirrors(config.deployment_mirrors_file(root),
                         [config.build_cache("iostack-deploy-buildcache", cache_dir)],
                         replace=False, written_by="`bin/iostack deploy --buildcache`")


def write_spider_cache(release: releases.Release, root: pathlib.Path) -> None:
    """The release's Lmod spider cache, and its module files, as users see them: with Core
    spelled <root>/current/modulefiles/Core (lib/iostack/deployment/lmodcache.py says why)."""
    seen_as = root / releases.CURRENT / "modulefiles" / "Core"
    try:
        cache = lmodcache.generate(release.path, seen_as)
        print(f"iostack: Lmod spider cache: {cache}")
    except (FileNotFoundError, process.CommandFailed) as e:
        detail = getattr(e, "stderr", "") or str(e)
        print(f"iostack: note: no Lmod spider cache for release {release.id} (Lmod walks its "
              f"tree instead): {detail.strip().splitlines()[-1] if detail.strip() else e}")
    finally:
        lmodcache.present_as(release.path, seen_as)


def build(site: str, root: pathlib.Path, release: releases.Release,
          buildcache: pathlib.Path | None = None) -> None:
    """Install the site's lock into the shared install tree and make the release's trees."""
    rel = release.path
    runner.checked(["concretize"], root, site=site, release=rel, what=f"concretizing site {site}")
    if buildcache:
        use_buildcache(root, buildcache)
        runner.checked(["install", "--fail-fast", "--use-buildcache", "only"], root, site=site,
                      release=rel, what=f"installing site {site} from the build cache {buildcache}")
    else:
        fetch = runner.spack(["fetch", "--missing"], root, site=site, release=rel, check=False,
                            capture_stderr=True)
        # Spack fails the fetch of an environment whose specs are all installed (a release
        # of a lock an earlier release installed): nothing to fetch, go on
        if fetch.returncode and "No uninstalled specs" not in fetch.stderr:
            raise Failed(f"fetching the sources of site {site} failed: "
                         f"{runner.error_line(fetch.stderr)}")
        runner.checked(["install", "--fail-fast"], root, site=site, release=rel,
                      what=f"installing site {site}")
    runner.checked(["module", "lmod", "refresh", "--delete-tree", "-y"], root, site=site,
                  release=rel, what="generating the Lmod tree")
    install_meta_modules(rel)
    render_fdb_config(rel, root / "var" / "fdb")
    write_spider_cache(release, root)
    releases.record(release, modulefiles_sha256=releases.tree_digest(release.modulefiles))


Regression = Callable[[pathlib.Path, list[str]], int]


def deploy(site: str, root: pathlib.Path, buildcache: pathlib.Path | None = None,
           regression: Regression | None = None, switch: bool = True) -> int:
    """Build a release; run `regression(release dir, ReFrame session options)` on it; switch
    `current` to it if that returned 0 (and `switch`). Returns the exit status."""
    roots.require_writable(root)
    print(f"iostack: deploying site {site} into {root}")
    release = releases.create(root, site, provenance.git_commit(),
                              paths.SPACK_ENV_SITES / site / releases.LOCK)
    print(f"iostack: release {release.id}: {release.path}")
    with releases.building(release):
        build(site, root, release, buildcache)
    how_to_switch = f"bin/iostack switch --site {site} --root {root} {release.id}"
    if regression is None:
        releases.record(release, regression=releases.UNTESTED)
        print(f"iostack: release {release.id} built, regression skipped: not made current; "
              f"to use it untested: {how_to_switch} --force")
        return 0
    try:
        rc = regression(release.path, releases.session_extras(release.path))
    except BaseException as e:  # it could not run to its end (its error says why)
        releases.record(release, regression=releases.FAILED,
                        regression_rc=getattr(e, "exit_code", getattr(e, "code", None)))
        raise
    releases.record(release, regression=releases.PASSED if rc == 0 else releases.FAILED,
                    regression_rc=rc)
    current = releases.current(root)
    if rc != 0:
        print(f"iostack: release {release.id} FAILED its regression (rc {rc}): not made current"
              f"{'; current stays ' + current if current else ''}. Its results: "
              f"{release.path / 'reframe'}")
        return rc
    if not switch:
        print(f"iostack: release {release.id} passed its regression; not switched (--no-switch)."
              f" To make it current: {how_to_switch}")
        return 0
    old, seconds = releases.switch(root, release.id)
    print(f"iostack: current: {old or '(none)'} -> {release.id} ({seconds * 1000:.1f} ms)\n"
          "iostack: users load its modules with:\n"
          f"  module use {root / releases.CURRENT / 'modulefiles' / 'Core'}\n  module load fdb")
    if (root / "modulefiles").is_dir():
        print(f"iostack: note: {root / 'modulefiles'} is the single tree of deploys before "
              "releases and is no longer updated; point MODULEPATH at the line above")
    return 0


def check_buildcache_arg(value: str | None) -> pathlib.Path | None:
    if value is None:
        return None
    path = pathlib.Path(value)
    if not path.is_dir():
        raise IostackError(f"build cache {path} is not a directory")
    return path
