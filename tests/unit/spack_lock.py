"""A committed spack.lock as a graph the lock and ReFrame-config tests ask questions of:
which compiler built a spec, what it links, which libc and MPI it uses."""
from __future__ import annotations

import json

from iostack.core import paths

LANGUAGES = ("c", "cxx", "fortran")


class Lock:
    def __init__(self, data: dict):
        self.data = data
        self.specs: dict[str, dict] = data["concrete_specs"]

    @classmethod
    def of(cls, site: str) -> Lock:
        return cls(json.loads((paths.SPACK_ENV_SITES / site / "spack.lock").read_text()))

    def roots(self) -> list[dict]:
        seen = dict.fromkeys(r["hash"] for r in self.data["roots"])
        return [self.specs[h] for h in seen]

    def named(self, name: str) -> list[dict]:
        return [s for s in self.specs.values() if s["name"] == name]

    def edges(self, spec: dict, virtual: str | None = None, deptype: str | None = None):
        for edge in spec.get("dependencies", []):
            params = edge["parameters"]
            if virtual and virtual not in params.get("virtuals", []):
                continue
            if deptype and deptype not in params.get("deptypes", []):
                continue
            yield self.specs[edge["hash"]]

    def compilers(self, spec: dict) -> set[str]:
        """name@version of every compiler the spec uses (for any language)."""
        return {label(c) for lang in LANGUAGES for c in self.edges(spec, lang)}

    def compiler(self, spec: dict) -> str | None:
        """The spec's one compiler, None if it compiles nothing; ValueError if several."""
        found = self.compilers(spec)
        if len(found) > 1:
            raise ValueError(f"{label(spec)} uses {sorted(found)}")
        return next(iter(found), None)

    def linked(self, spec: dict) -> list[dict]:
        """The spec and everything it links or runs, transitively (not build-only tools)."""
        seen, todo = {}, [spec]
        while todo:
            s = todo.pop()
            if s["hash"] in seen:
                continue
            seen[s["hash"]] = s
            todo += [d for kind in ("link", "run") for d in self.edges(s, deptype=kind)]
        return list(seen.values())

    def stack_compiler(self, spec: dict) -> set[str]:
        """The compilers of everything a spec links (one, in a consistent stack)."""
        return {c for s in self.linked(spec) for c in self.compilers(s)}


def target(spec: dict) -> str:
    """The spec's target name (a generic target is a string in the lock, a microarchitecture
    a dict)."""
    t = spec["arch"]["target"]
    return t if isinstance(t, str) else t["name"]


def label(spec: dict) -> str:
    return f"{spec['name']}@{spec['version']}"


def described(spec: dict) -> str:
    """name@version/hash: enough to find the spec in the lock."""
    return f"{label(spec)}/{spec['hash'][:7]}"
