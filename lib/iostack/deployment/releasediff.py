"""`bin/iostack releases diff A B`: what changed between two releases of a deployment, from
the spack.lock each release keeps (byte for byte the lock it was built from; releases.py).
The lock names every spec of the release, externals and build dependencies too, with its
DAG hash, so the comparison needs no Spack:

    added       a package B has and A has not
    removed     a package A has and B has not
    upgraded    a package whose version rose (downgraded: fell; changed: versions that do
                not compare, or a package held at several versions)
    rebuilt     the same version with a new hash: a dependency, variant, compiler or its
                recipe changed (the dependencies whose hash changed are named)

The user's guide of a release (guide.py) shows the same against the release before it.
"""
from __future__ import annotations

import dataclasses
import json
import re

from iostack.deployment import releases


@dataclasses.dataclass(frozen=True)
class Change:
    kind: str           # added, removed, upgraded, downgraded, changed, rebuilt
    name: str
    old: str = ""       # version(s) in A ("" if added)
    new: str = ""       # version(s) in B ("" if removed)
    detail: str = ""    # rebuilt: the hashes and why

    def line(self) -> str:
        if self.kind == "added":
            what = f"{self.name} {self.new}"
        elif self.kind == "removed":
            what = f"{self.name} {self.old}"
        elif self.kind == "rebuilt":
            what = f"{self.name} {self.new}"
        else:
            what = f"{self.name} {self.old} -> {self.new}"
        return f"{self.kind:10s} {what}{f'  ({self.detail})' if self.detail else ''}"


@dataclasses.dataclass
class Diff:
    old: str
    new: str
    changes: list[Change]
    unchanged: int

    def text(self) -> str:
        head = f"releases diff {self.old} -> {self.new}"
        if not self.changes:
            return f"{head}: the same {self.unchanged} packages, hash for hash"
        return "\n".join([head, *(c.line() for c in self.changes),
                          f"unchanged  {self.unchanged} packages"])


def read_lock(release: releases.Release) -> dict:
    path = release.path / releases.LOCK
    try:
        lock = json.loads(path.read_text())
        specs = lock["concrete_specs"]
        if not isinstance(specs, dict):
            raise ValueError("concrete_specs is not a mapping")
    except FileNotFoundError:
        raise releases.ReleaseError(f"release {release.id} has no {releases.LOCK} "
                                    f"({path}), so nothing to compare") from None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise releases.ReleaseError(f"release {release.id}: {path} is not a Spack lock "
                                    f"({e.__class__.__name__}: {e})") from None
    return specs


def _version_key(version: str) -> tuple[int, ...] | None:
    """A version's numeric parts, None where it has others (a commit: 2023.bb08c87)."""
    parts = re.split(r"[.\-_]", version)
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def _by_name(specs: dict) -> dict[str, dict[str, list[tuple[str, dict]]]]:
    """name -> version -> [(hash, spec)]"""
    out: dict[str, dict[str, list[tuple[str, dict]]]] = {}
    for h, spec in specs.items():
        out.setdefault(spec["name"], {}).setdefault(str(spec["version"]), []).append((h, spec))
    return out


def _deps(spec: dict, specs: dict) -> dict[str, str]:
    return {specs.get(d["hash"], {}).get("name", d.get("name", "?")): d["hash"]
            for d in spec.get("dependencies", [])}


def compare(old_specs: dict, new_specs: dict) -> tuple[list[Change], int]:
    """(changes, number of packages unchanged) between two locks' concrete_specs."""
    a, b = _by_name(old_specs), _by_name(new_specs)
    changes, unchanged = [], 0
    for name in sorted(a.keys() | b.keys()):
        va, vb = a.get(name, {}), b.get(name, {})
        if not va:
            changes.append(Change("added", name, new=", ".join(sorted(vb))))
        elif not vb:
            changes.append(Change("removed", name, old=", ".join(sorted(va))))
        elif set(va) != set(vb):
            old, new = ", ".join(sorted(va)), ", ".join(sorted(vb))
            kind = "changed"
            if len(va) == len(vb) == 1:
                ka, kb = _version_key(old), _version_key(new)
                if ka is not None and kb is not None:
                    kind = "upgraded" if kb > ka else "downgraded"
            changes.append(Change(kind, name, old=old, new=new))
        else:
            rebuilt = False
            for version in sorted(va):
                ha = sorted(h for h, _ in va[version])
                hb = sorted(h for h, _ in vb[version])
                if ha == hb:
                    continue
                rebuilt = True
                if len(ha) == len(hb) == 1:
                    da, db = _deps(va[version][0][1], old_specs), _deps(vb[version][0][1], new_specs)
                    moved = sorted(n for n in da.keys() | db.keys() if da.get(n) != db.get(n))
                    why = (f"dependencies changed: {', '.join(moved)}" if moved
                           else "its recipe, variants or flags changed")
                    detail = f"{ha[0][:7]} -> {hb[0][:7]}; {why}"
                else:
                    detail = f"{', '.join(h[:7] for h in ha)} -> {', '.join(h[:7] for h in hb)}"
                changes.append(Change("rebuilt", name, old=version, new=version, detail=detail))
            unchanged += not rebuilt
    return changes, unchanged


def diff(old: releases.Release, new: releases.Release) -> Diff:
    changes, unchanged = compare(read_lock(old), read_lock(new))
    return Diff(old.id, new.id, changes, unchanged)
