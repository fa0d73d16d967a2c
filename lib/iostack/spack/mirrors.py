"""A site's source mirror and signed build cache, with Spack's own commands.

- `mirror create`: the sources of everything a site's lock builds (`spack mirror create`),
  fetched through the mirrors this node has (the network, or an offline bundle's), for a
  node that will have none.
- `buildcache push`: the site's installed specs as a signed binary mirror
  (`spack buildcache push`), by default <root>/buildcache; the signing key is created in
  this node's key ring (`spack gpg create`) unless one is given.
- `deploy --buildcache DIR` installs from such a cache only, checking its signatures
  against the keys this node trusts (set-up from a bundle trusts the bundle's).
"""
from __future__ import annotations

import logging
import pathlib
import re

from iostack.core.errors import IostackError
from iostack.site.target import Target
from iostack.spack import runner

log = logging.getLogger(__name__)

KEY_NAME = "iostack build cache"
KEY_EMAIL = "iostack-buildcache@localhost"


def create_source_mirror(target: Target, dest: pathlib.Path) -> pathlib.Path:
    dest.mkdir(parents=True, exist_ok=True)
    runner.checked(["mirror", "create", "--directory", dest, "--all"], target,
                   what=f"creating the source mirror of {target.env}")
    log.info(f"source mirror of {target.env}: {dest}")
    return dest


def signing_key(target: Target, key_file: pathlib.Path | None) -> str:
    """The fingerprint to sign with: the given key (imported), else this node's iostack key,
    created on first use."""
    if key_file:
        if not key_file.is_file():
            raise IostackError(f"signing key {key_file} does not exist")
        runner.checked(["gpg", "trust", key_file], target, in_env=False,
                       what=f"importing the key {key_file}")
    out = runner.spack(["gpg", "list", "--signing"], target, in_env=False, capture=True,
                       check=False).stdout
    keys = re.findall(r"^\s*([0-9A-F]{40})\s*$", out, re.M)
    if not keys:
        if key_file:
            raise IostackError(f"{key_file} holds no secret key to sign with (export it with "
                               "`gpg --export-secret-keys`)")
        runner.checked(["gpg", "create", KEY_NAME, KEY_EMAIL], target, in_env=False,
                       what="creating the build cache signing key")
        out = runner.spack(["gpg", "list", "--signing"], target, in_env=False,
                           capture=True).stdout
        keys = re.findall(r"^\s*([0-9A-F]{40})\s*$", out, re.M)
    return keys[-1] if key_file else keys[0]


def push(target: Target, dest: pathlib.Path,
         key_file: pathlib.Path | None = None) -> pathlib.Path:
    try:
        key = signing_key(target, key_file)
        dest.mkdir(parents=True, exist_ok=True)
        runner.checked(["buildcache", "push", "--key", key, "--update-index",
                        "--with-build-dependencies", dest], target,
                       what=f"pushing {target.env} to the build cache {dest}")
        runner.checked(["gpg", "publish", "--directory", dest, "--update-index", key], target,
                       in_env=False, what=f"publishing the signing key in {dest}")
    finally:
        runner.stop_gpg_agent(target.settings)     # signing started one
    log.info(f"build cache of {target.env}, signed with {key}: {dest}")
    return dest
