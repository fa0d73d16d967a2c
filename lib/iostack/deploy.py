"""`bin/iostack deploy`: install a site's stack under a deployment root, make its modules,
run its regression.

Order, so that a bad input stops the deploy before anything is installed:
1. concretize (the committed spack.lock);
2. from sources: fetch every source first, checksums verified (`spack fetch --missing`);
   from a build cache (--buildcache): trust the keys it ships and install from it only;
3. install, then generate the Lmod tree, meta-modules and the FDB config;
4. the site's nightly regression (unless --skip-regression).
"""
from __future__ import annotations

import pathlib
import shutil

from iostack import fdbconfig, paths, roots, spack
from iostack.run import die


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


def render_fdb_config(root_dir):
    """The FDB config openifs-env points FDB5_CONFIG_FILE at: root <root>/var/fdb, schema of
    the FDB in use (FDB5_SCHEMA, $FDB_ROOT/etc/fdb/schema or /etc/fdb/schema)."""
    out = root_dir / "etc" / "fdb5" / "config.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        fdbconfig.write(root_dir / "var" / "fdb", out)
    except FileNotFoundError:
        print("iostack: note: no FDB schema found, so no FDB config written; set FDB5_SCHEMA")
        return
    print(f"iostack: FDB config: {out}")


def use_buildcache(root: pathlib.Path, cache_dir: pathlib.Path) -> None:
    """Record the build cache for this deployment (spack-env/common/mirrors.yaml includes
    <root>/spack-config/mirrors.yaml). Its signatures are checked against the keys this node
    already trusts, never against keys the cache itself ships: whoever can write the cache
    could ship theirs."""
    cache_dir = cache_dir.resolve()
    conf = root / "spack-config" / "mirrors.yaml"
    conf.parent.mkdir(parents=True, exist_ok=True)
    conf.write_text("# written by `bin/iostack deploy --buildcache`\nmirrors:\n"
                    "  iostack-deploy-buildcache:\n"
                    f"    url: {cache_dir.as_uri()}\n"
                    "    source: false\n    binary: true\n    signed: true\n")


def deploy(site: str, root: pathlib.Path, buildcache: pathlib.Path | None = None) -> None:
    roots.require_writable(root)
    print(f"iostack: deploying site {site} into {root}")
    spack.checked(["concretize"], root, site=site, what=f"concretizing site {site}")
    if buildcache:
        use_buildcache(root, buildcache)
        spack.checked(["install", "--fail-fast", "--use-buildcache", "only"], root, site=site,
                      what=f"installing site {site} from the build cache {buildcache}")
    else:
        spack.checked(["fetch", "--missing"], root, site=site,
                      what=f"fetching the sources of site {site}")
        spack.checked(["install", "--fail-fast"], root, site=site,
                      what=f"installing site {site}")
    spack.checked(["module", "lmod", "refresh", "--delete-tree", "-y"], root, site=site,
                  what="generating the Lmod tree")
    install_meta_modules(root)
    render_fdb_config(root)
    print("iostack: modules ready. Use them with:\n"
          f"  module use {root / 'modulefiles' / 'Core'}\n  module load fdb")


def check_buildcache_arg(value: str | None) -> pathlib.Path | None:
    if value is None:
        return None
    path = pathlib.Path(value)
    if not path.is_dir():
        die(f"build cache {path} is not a directory")
    return path
