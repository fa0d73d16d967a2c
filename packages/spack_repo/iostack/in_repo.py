"""Recipes whose source lives in this repository (src/<name>), not behind a URL.

Nothing is downloaded, so Spack has no checksum to tell two sources apart: a changed source
under an unchanged version would install as the same spec, and a deployment would keep the
old build. Each recipe therefore records the sha256 of its source tree per version
(`SOURCE_SHA256`), and `checked_source` refuses a tree that is not the one its version names,
or whose declared version is not the recipe's; tests/unit/test_recipes.py fails as soon as a
source changes without a new version.
"""
import hashlib
import os
import re

from spack.package import InstallError

# packages/spack_repo/iostack/in_repo.py -> the repository root, three levels up
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 3))


def source_dir(name: str) -> str:
    return os.path.join(REPO_ROOT, "src", name)


def tree_sha256(path: str) -> str:
    """sha256 over a source tree: each file's relative path and bytes, in sorted order
    (hidden files, __pycache__ and build directories left out)."""
    digest = hashlib.sha256()
    files = []
    for top, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith((".", "build")) and d != "__pycache__"]
        files += [os.path.join(top, n) for n in names if not n.startswith(".")]
    for f in sorted(files):
        digest.update(os.path.relpath(f, path).encode() + b"\0")
        with open(f, "rb") as fh:
            digest.update(fh.read())
        digest.update(b"\0")
    return digest.hexdigest()


def checked_source(pkg, name: str, version_file: str, version_pattern: str,
                   digests: dict) -> str:
    """src/<name>, after checking that `version_file` there declares the spec's version and
    that the tree is the one `digests` records for that version."""
    path = os.path.join(source_dir(name), version_file)
    if not os.path.isfile(path):
        raise InstallError(f"{pkg.name}: in-repo source not found at {path}")
    with open(path) as f:
        declared = re.search(version_pattern, f.read(), re.M)
    if not declared or declared.group(1) != str(pkg.spec.version):
        raise InstallError(
            f"{path} declares version {declared and declared.group(1)}, recipe builds "
            f"{pkg.spec.version}: update the recipe's version()"
        )
    actual = tree_sha256(source_dir(name))
    if digests.get(str(pkg.spec.version)) != actual:
        raise InstallError(
            f"src/{name} (sha256 {actual}) is not the source {pkg.name}@{pkg.spec.version} "
            f"names ({digests.get(str(pkg.spec.version))}): a changed source needs a new version"
        )
    return source_dir(name)
