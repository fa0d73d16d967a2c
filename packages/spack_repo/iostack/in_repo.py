"""Recipes whose source lives in this repository (src/<name>), not behind a URL.

Nothing is downloaded: the iostack commit pins the code, so there is no sha256. The
recipe's version must equal the one the source declares, which `checked_source` enforces.
"""
import os
import re

from spack.package import InstallError

# packages/spack_repo/iostack/in_repo.py -> the repository root, three levels up
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 3))


def source_dir(name: str) -> str:
    return os.path.join(REPO_ROOT, "src", name)


def checked_source(pkg, name: str, version_file: str, version_pattern: str) -> str:
    """src/<name>, after checking that `version_file` there declares the spec's version."""
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
    return source_dir(name)
