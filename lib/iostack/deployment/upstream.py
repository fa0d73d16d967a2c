"""A release as a Spack upstream for its users: `<release>/spack-user/`, a Spack configuration
scope that a user's own Spack (v1.1) reads with one option,

    spack -C <root>/releases/<id>/spack-user install my-model

and then reuses every install of the release (marked [^] by `spack spec -I`), building only
what the release does not hold, in the user's own install tree. The scope holds:

    upstreams.yaml      the deployment's install tree (<root>/opt) as a read-only upstream
    repos.yaml          the release's copy of iostack's recipes (repos/spack_repo/iostack):
                        its installs name namespace `iostack`, and Spack reuses an install
                        only if it knows its recipe
    packages.yaml       the site's externals and target, as the release was built with them
                        (compilers, MPI, ecCodes...): the user's build uses the same
    concretizer.yaml    reuse on (the stack's own lock is made with reuse off)
    README.md           the command above, for a user who finds the directory

A pointer to <root>/current would change under a user's installs when `current` moves, so the
scope names its release's path. The image of a release (image.py) holds the scope and the
upstream's database, so the same command works on a release mounted from its image.
"""
from __future__ import annotations

import logging
import pathlib
import shutil
import stat

from iostack.core import paths

log = logging.getLogger(__name__)

SCOPE = "spack-user"


def scope_dir(release_path: pathlib.Path) -> pathlib.Path:
    return release_path / SCOPE


def command(release_path: pathlib.Path) -> str:
    """The one command a user runs (documented in the scope's README and the user's guide)."""
    return f"spack -C {scope_dir(release_path)} install <your package>"


def _header(what: str) -> str:
    return (f"# Written by bin/iostack deploy for this release: {what}.\n"
            "# Use: spack -C <this directory> ... (README.md beside this file)\n")


def write(release_path: pathlib.Path, root: pathlib.Path, site: str,
          repo: pathlib.Path | None = None) -> pathlib.Path:
    """Write the release's user scope (see the module's docstring); returns its directory.
    `site` names the release's spack-env/sites/<site>/packages.yaml; `repo` is the iostack
    recipes' repository (default the checkout's)."""
    out = scope_dir(release_path)
    if out.exists():
        shutil.rmtree(out)
    recipes = out / "repos" / "spack_repo" / "iostack"
    shutil.copytree(repo or paths.REPO / "packages" / "spack_repo" / "iostack", recipes,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    install_tree = root / "opt"
    name = f"iostack-{site}-{release_path.name}"
    (out / "upstreams.yaml").write_text(
        _header("the deployment's install tree as a read-only Spack upstream")
        + f"upstreams:\n  {name}:\n    install_tree: {install_tree}\n")
    (out / "repos.yaml").write_text(
        _header("the recipes the release's installs were built from (namespace iostack)")
        + f"repos:\n  iostack: {recipes}\n")
    site_packages = release_path / "spack-env" / "sites" / site / "packages.yaml"
    if site_packages.is_file():     # a site without one builds everything it needs
        (out / "packages.yaml").write_text(
            _header(f"the externals of site {site} ({site_packages.relative_to(release_path)})")
            + site_packages.read_text())
    (out / "concretizer.yaml").write_text(
        _header("reuse what is installed, the release's installs first")
        + "concretizer:\n  reuse: true\n")
    (out / "README.md").write_text(readme(release_path, install_tree))
    publish_database(install_tree)
    return out


def publish_database(install_tree: pathlib.Path) -> None:
    """Make Spack's install database readable by every user, as an upstream must be: Spack
    writes it with the umask of whoever installed last (0600 under umask 077), and a user's
    Spack then stops at `Permission denied` on index.json."""
    db = install_tree / ".spack-db"
    for path, bits in ((install_tree, 0o005), (db, 0o005), (db / "index.json", 0o004)):
        if not path.exists():
            continue
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & bits != bits:
            path.chmod(mode | bits | (bits << 3))
            log.info(f"note: {path} made readable by users (mode {mode:o} -> "
                  f"{stat.S_IMODE(path.stat().st_mode):o}): the release's Spack upstream")


def readme(release_path: pathlib.Path, install_tree: pathlib.Path) -> str:
    scope = scope_dir(release_path)
    return f"""# Building on release {release_path.name} with your own Spack

This directory is a Spack configuration scope. Give it to your Spack (v1.1) with `-C`:

    spack -C {scope} spec -I my-model     # [^] marks what the release already holds
    spack -C {scope} install my-model

Your Spack then reuses the release's installs in {install_tree} (an upstream, read only)
and builds only the rest, in your own install tree (`config:install_tree:root` in your
~/.spack/config.yaml). Asking for a version the release does not hold builds that version in
your tree too. To make it permanent, add to ~/.spack/include.yaml:

    include:
    - {scope}

Your Spack needs the builtin recipes (spack-packages) and a Python with clingo
(`SPACK_PYTHON`), as any Spack does. The release stays as it is: nothing here is written by
your Spack.
"""
