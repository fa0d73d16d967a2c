"""`bin/iostack deploy`: build a site's stack as a new release of a deployment root, run its
regression on it, and make it current only if that passes (lib/iostack/deployment/releases.py).

Order, so that a bad input stops the deploy before anything is installed:
1. a new release <root>/releases/<id> (the commit and lock it is built from);
2. concretize (the committed spack.lock) in the release's own copy of the environment: with
   the lock fixing every spec, Spack solves nothing; a deploy from a build cache refuses a
   lock that does not;
3. from sources: fetch every source first, checksums verified (`spack fetch --missing`);
   from a build cache (--buildcache): install from it only, signed by keys this node trusts;
4. install into the deployment's one install tree, then generate the release's Lmod tree,
   meta-modules, FDB config, users' Spack scope (upstream.py), Lmod spider cache, SBOM
   (lib/iostack/deployment/sbom.py) and user's guide (guide.py), each phase timed (wall
   and CPU seconds, release.json `build_phases`);
5. the site's nightly regression on the release (unless --skip-regression);
6. `current` moves to the release if the regression passed (unless --no-switch).
A release that fails a step keeps its verdict (`build failed`, `failed`) and is never current.
"""
from __future__ import annotations

import logging
import json
import pathlib
import shutil
from collections.abc import Callable

from iostack.core import paths, phases, process, provenance
from iostack.core.errors import Failed, IostackError
from iostack.deployment import fdbconfig, guide, lmodcache, releases, roots, sbom, stack, upstream
from iostack.site.target import SpackEnv, Target
from iostack.spack import config, runner

log = logging.getLogger(__name__)


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
        log.info(f"meta-modules installed in {core}: {', '.join(installed)}")


#: where a release says which modules load each of its packages (meta-modules read it)
MODULE_CHAINS = pathlib.Path("etc") / "lmod" / "hierarchy.lua"


def write_module_chains(root_dir: pathlib.Path, env: SpackEnv) -> pathlib.Path:
    """<release>/etc/lmod/hierarchy.lua: for each package of the release's lock, the modules
    that load it on the tree Spack wrote, its compiler's and MPI's first (fdb sits under
    openmpi/<version>/Core). A meta-module loads what it needs through it, in the order a
    user would, so it loads on the deployed hierarchy (modulefiles/README.md)."""
    specs = stack.root_specs(json.loads((root_dir / releases.LOCK).read_text()),
                             stack.core_compilers(env))
    chains: dict[str, list[str]] = {}
    for spec in specs:      # a package built twice (Cray: CCE and GNU): the first key's
        chains.setdefault(spec.name, spec.modules_to_load())
    lines = ["-- Written by bin/iostack deploy from this release's spack.lock: the modules that",
             "-- load each package on its Lmod tree, in order. Read by the meta-modules.",
             "return {"]
    lines += [f'  ["{name}"] = {{{", ".join(json.dumps(m) for m in chain)}}},'
              for name, chain in sorted(chains.items())]
    out = root_dir / MODULE_CHAINS
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines + ["}"]) + "\n")
    return out


def render_fdb_config(root_dir, fdb_root=None, schema: pathlib.Path | None = None):
    """The FDB config openifs-env points FDB5_CONFIG_FILE at: root `fdb_root` (default
    <root_dir>/var/fdb; a release's is the deployment's, as data outlive releases), the
    node's FDB schema (/etc/fdb/schema: the MARS schema both FDBs of the stack read)."""
    out = root_dir / "etc" / "fdb5" / "config.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        fdbconfig.write(fdb_root or root_dir / "var" / "fdb", out,
                        schema or fdbconfig.find_schema({}))
    except FileNotFoundError:
        log.info("note: no FDB schema found, so no FDB config written; set FDB5_SCHEMA")
        return
    log.info(f"FDB config: {out}")


def use_buildcache(root: pathlib.Path, cache_dir: pathlib.Path) -> None:
    """Record the build cache for this deployment (spack-env/common/mirrors.yaml includes
    <root>/spack-config/mirrors.yaml). Its signatures are checked against the keys this node
    already trusts, never against keys the cache itself ships: whoever can write the cache
    could ship theirs."""
    config.write_mirrors(config.deployment_mirrors_file(root),
                         [config.build_cache("iostack-deploy-buildcache", cache_dir)],
                         replace=False, written_by="`bin/iostack deploy --buildcache`")


def write_spider_cache(target: Target, release: releases.Release) -> None:
    """The release's Lmod spider cache, and its module files, as users see them: with Core
    spelled <root>/current/modulefiles/Core (lib/iostack/deployment/lmodcache.py says why)."""
    seen_as = target.root / releases.CURRENT / "modulefiles" / "Core"
    try:
        cache = lmodcache.generate(release.path, seen_as, target.settings.lmod_cmd)
        log.info(f"Lmod spider cache: {cache}")
    except (FileNotFoundError, process.CommandFailed, lmodcache.UnknownLmod) as e:
        detail = getattr(e, "stderr", "") or str(e)
        log.info(f"note: no Lmod spider cache for release {release.id} (Lmod walks its "
              f"tree instead): {detail.strip().splitlines()[-1] if detail.strip() else e}")
    finally:
        lmodcache.present_as(release.path, seen_as)


#: what `spack concretize` says when the environment's lock already fixes every spec
LOCK_COVERS_ALL = "No new specs to concretize"


LOCK_LEAVES_SPECS = ("{env}'s spack.lock does not fix every spec of its spack.yaml, so "
                     "Spack would concretize again; a deploy from a build cache installs the "
                     "lock as it is: `bin/iostack lock --update {env}`, commit, build and push "
                     "again")


def names_the_lock_leaves_open(env_dir: pathlib.Path) -> set[str] | None:
    """The packages that env_dir's spack.yaml's specs name and its spack.lock's roots do not, or the
    other way round (empty: the same packages); None where the manifest says more than
    plain strings and lists of them (`$name` of a plain definition in it or a file it
    includes), which only Spack's concretize can judge. A deploy from a build cache refuses
    a difference before a solve of minutes finds it."""
    import yaml

    try:
        manifest = yaml.safe_load((env_dir / "spack.yaml").read_text())["spack"]
        definitions: dict[str, list] = {}
        for doc in [manifest, *(yaml.safe_load((env_dir / inc).read_text()) or {}
                                for inc in manifest.get("include", []))]:
            for entry in doc.get("definitions", []) if isinstance(doc, dict) else []:
                for name, values in entry.items():
                    if not isinstance(values, list):
                        return None     # a `when:` or a matrix
                    definitions.setdefault(name, []).extend(values)
        lock = json.loads((env_dir / "spack.lock").read_text())
    except (OSError, ValueError, KeyError, TypeError, AttributeError, yaml.YAMLError):
        return None

    def expand(specs, depth=0):
        for spec in specs:
            if not isinstance(spec, str) or depth > 10:
                raise TypeError(spec)
            if spec.startswith("$"):
                yield from expand(definitions[spec[1:]], depth + 1)
            else:
                yield spec
    try:
        wanted = [stack.spec_name(s) for s in expand(manifest.get("specs", []))]
    except (TypeError, KeyError):
        return None
    locked = [stack.spec_name(r.get("spec", "")) for r in lock.get("roots", [])]
    if None in wanted or None in locked:
        return None
    return set(filter(None, wanted)) ^ set(filter(None, locked))


def write_sbom(target: Target, release: releases.Release) -> None:
    log.info(f"SBOM (CycloneDX 1.6): {sbom.write(target, release)}")


def build(target: Target, release: releases.Release,
          buildcache: pathlib.Path | None = None) -> None:
    """Install the environment's lock into the shared install tree and make the release's
    trees (`target` names the release)."""
    rel, root, env = release.path, target.root, target.env
    timer = phases.Timer()
    if buildcache and names_the_lock_leaves_open(paths.SPACK_ENV_SITES / env.name):
        raise Failed(LOCK_LEAVES_SPECS.format(env=env))
    with timer("concretize"):
        concretized = runner.spack(["concretize"], target, check=False, capture=True,
                                   capture_stderr=True)
    log.info(concretized.stdout.rstrip("\n"), extra={"bare": True})
    if concretized.returncode != 0:
        raise Failed(f"concretizing {env} failed: {runner.error_line(concretized.stderr)}")
    if buildcache and LOCK_COVERS_ALL not in concretized.stdout:
        # what a build cache holds was built from the lock: a spec concretized now may be
        # in no cache, and the lock no longer says what the release is
        raise Failed(LOCK_LEAVES_SPECS.format(env=env))
    if buildcache:
        use_buildcache(root, buildcache)
        with timer("install"):
            try:
                runner.checked(["install", "--fail-fast", "--use-buildcache", "only"], target,
                               what=f"installing {env} from the build cache {buildcache}")
            finally:
                # signature checks start one; no daemon outlives a deploy
                runner.stop_gpg_agent(target.settings)
    else:
        with timer("fetch"):
            fetch = runner.spack(["fetch", "--missing"], target, check=False,
                                 capture_stderr=True)
        # Spack fails the fetch of an environment whose specs are all installed (a release
        # of a lock an earlier release installed): nothing to fetch, go on
        if fetch.returncode and "No uninstalled specs" not in fetch.stderr:
            raise Failed(f"fetching the sources of {env} failed: "
                         f"{runner.error_line(fetch.stderr)}")
        with timer("install"):
            runner.checked(["install", "--fail-fast"], target, what=f"installing {env}")
    with timer("modules"):
        runner.checked(["module", "lmod", "refresh", "--delete-tree", "-y"], target,
                       what="generating the Lmod tree")
        install_meta_modules(rel)
        write_module_chains(rel, env)
        render_fdb_config(rel, root / "var" / "fdb")
    with timer("spack upstream"):
        upstream.write(rel, root, env.site)
        log.info(f"users' Spack builds on this release with: {upstream.command(rel)}")
    with timer("spider cache"):
        write_spider_cache(target, release)
    releases.record(release, modulefiles_sha256=releases.tree_digest(release.modulefiles))
    with timer("sbom"):
        write_sbom(target, release)
    with timer("guide"):
        log.info(f"user's guide: {guide.write(root, release, stack.core_compilers(env))}")
    releases.record(release, build_phases=timer.record())


#: the regression of a release: (the target naming it, ReFrame session options) -> exit code
Regression = Callable[[Target, list[str]], int]


def deploy(target: Target, buildcache: pathlib.Path | None = None,
           regression: Regression | None = None, switch: bool = True) -> int:
    """Build a release of the target's environment in its root; run `regression` on it;
    switch `current` to it if that returned 0 (and `switch`). Returns the exit status."""
    root, env = target.root, target.env
    roots.require_writable(root)
    # held to the end: a prune on any host must not remove the release or its installs
    with releases.hold_root(root, f"deploy of {env}"):
        return _deploy(target, buildcache, regression, switch)


def _deploy(target: Target, buildcache: pathlib.Path | None, regression: Regression | None,
            switch: bool) -> int:
    root, env = target.root, target.env
    log.info(f"deploying {env} into {root}")
    release = releases.create(root, env, provenance.git_commit(), env.committed_lock)
    log.info(f"release {release.id}: {release.path}")
    target = target.with_release(release.path)
    with releases.building(release):
        build(target, release, buildcache)
    how_to_switch = f"bin/iostack switch --site {env.site} --root {root} {release.id}"
    if regression is None:
        releases.record(release, regression=releases.UNTESTED)
        log.info(f"release {release.id} built, regression skipped: not made current; "
              f"to use it untested: {how_to_switch} --force")
        return 0
    try:
        rc = regression(target, releases.session_extras(release.path))
    except BaseException as e:  # it could not run to its end (its error says why)
        releases.record(release, regression=releases.FAILED,
                        regression_rc=getattr(e, "exit_code", getattr(e, "code", None)))
        raise
    releases.record(release, regression=releases.PASSED if rc == 0 else releases.FAILED,
                    regression_rc=rc)
    current = releases.current(root)
    if rc != 0:
        log.info(f"release {release.id} FAILED its regression (rc {rc}): not made current"
              f"{'; current stays ' + current if current else ''}. Its results: "
              f"{release.path / 'reframe'}")
        return rc
    if not switch:
        log.info(f"release {release.id} passed its regression; not switched (--no-switch)."
              f" To make it current: {how_to_switch}")
        return 0
    old, seconds = releases.switch(root, release.id)
    log.info(f"current: {old or '(none)'} -> {release.id} ({seconds * 1000:.1f} ms)\n"
          "iostack: users load its modules with:\n"
          f"  module use {root / releases.CURRENT / 'modulefiles' / 'Core'}\n  module load fdb")
    if (root / "modulefiles").is_dir():
        log.info(f"note: {root / 'modulefiles'} is the single tree of deploys before "
              "releases and is no longer updated; point MODULEPATH at the line above")
    return 0


def check_buildcache_arg(value: str | None) -> pathlib.Path | None:
    if value is None:
        return None
    path = pathlib.Path(value)
    if not path.is_dir():
        raise IostackError(f"build cache {path} is not a directory")
    return path
