"""Spack configuration files that iostack writes: the mirrors of a node, of a deployment and
of a one-off scope, all through `mirrors_yaml`.

spack-env/common/mirrors.yaml includes two of them:
- <cache>/spack-config/mirrors.yaml (`registered_mirrors_file`): what set-up registered for
  every site on the node (an offline bundle's source mirror and build cache);
- <root>/spack-config/mirrors.yaml (`deployment_mirrors_file`): the build cache a
  deployment installs from (`deploy --buildcache`).
Standard library only: set-up writes before the venv with PyYAML exists.
"""
from __future__ import annotations

import json
import pathlib
from typing import NamedTuple



class Mirror(NamedTuple):
    name: str
    url: str
    #: a source mirror (`spack mirror create`) or a binary build cache (`buildcache push`)
    binary: bool
    signed: bool = True


def registered_mirrors_file(cache: pathlib.Path) -> pathlib.Path:
    """The Spack config file, outside every site, that set-up writes the bundle's mirrors to
    (in the cache directory); spack-env/common/mirrors.yaml includes it, so every site on
    this node uses them."""
    return cache / "spack-config" / "mirrors.yaml"


def deployment_mirrors_file(root: pathlib.Path) -> pathlib.Path:
    return root / "spack-config" / "mirrors.yaml"


def source_mirror(name: str, directory: pathlib.Path) -> Mirror:
    return Mirror(name, directory.resolve().as_uri(), binary=False)


def build_cache(name: str, directory: pathlib.Path, signed: bool = True) -> Mirror:
    return Mirror(name, directory.resolve().as_uri(), binary=True, signed=signed)


def mirrors_yaml(mirrors: list[Mirror], replace: bool, written_by: str) -> str:
    """A mirrors.yaml of `mirrors`. `replace` writes `mirrors::`, which replaces every
    mirror of lower scopes, Spack's default public one included: on a node set up from a
    bundle, nothing is fetched from anywhere but the bundle's mirrors. (json.dumps quotes
    each value as YAML reads it.)"""
    lines = [f"# written by {written_by}", "mirrors::" if replace else "mirrors:"]
    for m in mirrors:
        lines += [f"  {m.name}:", f"    url: {json.dumps(m.url)}",
                  f"    source: {json.dumps(not m.binary)}", f"    binary: {json.dumps(m.binary)}"]
        if m.binary:
            lines.append(f"    signed: {json.dumps(m.signed)}")
    if not mirrors:
        lines[-1] += " {}"
    return "\n".join(lines) + "\n"


def write_mirrors(path: pathlib.Path, mirrors: list[Mirror], replace: bool,
                  written_by: str) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(mirrors_yaml(mirrors, replace, written_by))
    return path
