"""What a site's stack contains, read from its committed spack.lock: the root specs, each
with the modules the Lmod hierarchy loads before its own. The stack smoke check makes a test
case of each (iostack_rfm.parsers.smoke says how each program states its version), so the list of
packages is never kept by hand. Needs PyYAML only for a site's modules.yaml.
"""
from __future__ import annotations

import dataclasses
import json
import pathlib
import re

from iostack.site.target import SpackEnv

# Virtual dependencies whose provider's module must be loaded first (Lmod hierarchy:
# spack-env/common/modules.yaml puts MPI-dependent packages under their MPI).
HIERARCHY_VIRTUALS = ("mpi",)
# The compiler a spec sits under in the hierarchy: the provider of the first of these.
COMPILER_VIRTUALS = ("c", "cxx", "fortran")


@dataclasses.dataclass(frozen=True)
class RootSpec:
    name: str
    version: str
    hash: str
    #: prefix of an external (not built by Spack), else None
    external_prefix: str | None = None
    #: modules an external is loaded with (Cray PE externals), else ()
    external_modules: tuple[str, ...] = ()
    #: modules to load before its own: its compiler's (unless a core compiler), then
    #: its MPI's, as `name/version`
    hierarchy: tuple[str, ...] = ()
    #: a BundlePackage: no program of its own
    bundle: bool = False
    #: the compiler (or Cray PE flavour, craype=cce|gnu) it was built with, "" if none
    compiler: str = ""
    #: name@version, with %compiler or /hash when the lock has it more than once
    key: str = ""

    @property
    def module(self) -> str:
        """The module Spack generates for it (projection `{name}/{version}`)."""
        return f"{self.name}/{self.version}"

    @property
    def is_external(self) -> bool:
        return self.external_prefix is not None or bool(self.external_modules)

    def modules_to_load(self) -> list[str]:
        if self.external_modules:
            return list(self.external_modules)
        return list(self.hierarchy) + [self.module]


#: a spec string's package: the name it starts with (`fdb@5.13 +tools %gcc` names fdb)
_SPEC_NAME = re.compile(r"\s*([a-z0-9][a-z0-9_-]*)(?=$|[\s@%+~^=/])")


def spec_name(spec: str) -> str | None:
    """The package a spec string names first, None if it starts with no name (`^zlib`)."""
    m = _SPEC_NAME.match(spec)
    return m.group(1) if m else None


def _providers(spec: dict, specs: dict, virtuals, transitive: bool = False) -> list[dict]:
    """Providers of the virtuals among a spec's dependencies; with `transitive`, anywhere in
    its link/run DAG, as Spack's Lmod hierarchy sees MPI (fdb sits under Open MPI because
    eckit+mpi does)."""
    found, todo, seen = [], [spec], set()
    while todo:
        current = todo.pop()
        for dep in current.get("dependencies", []):
            if dep["hash"] not in specs:
                continue
            parameters = dep.get("parameters", {})
            provider = specs[dep["hash"]]
            if any(v in parameters.get("virtuals", []) for v in virtuals) and provider not in found:
                found.append(provider)
            link_or_run = {"link", "run"} & set(parameters.get("deptypes", []))
            if transitive and link_or_run and dep["hash"] not in seen:
                seen.add(dep["hash"])
                todo.append(provider)
    return found


def root_specs(lock: dict, core_compilers=()) -> list[RootSpec]:
    """The lock's root specs (deduplicated: unify:false locks list a spec per matrix row)."""
    specs = lock["concrete_specs"]
    seen, roots = set(), []
    for root in lock["roots"]:
        if root["hash"] in seen:
            continue
        seen.add(root["hash"])
        spec = specs[root["hash"]]
        external = spec.get("external") or {}
        hierarchy = []
        compilers = _providers(spec, specs, COMPILER_VIRTUALS)[:1]
        for c in compilers:
            if f"{c['name']}@{c['version']}" not in core_compilers:
                hierarchy.append(f"{c['name']}/{c['version']}")
        hierarchy += [f"{p['name']}/{p['version']}"
                      for p in _providers(spec, specs, HIERARCHY_VIRTUALS, transitive=True)]
        module = external.get("module") or ()
        roots.append(dict(
            name=spec["name"], version=str(spec["version"]), hash=root["hash"],
            external_prefix=external.get("path") if external else None,
            external_modules=tuple([module] if isinstance(module, str) else module),
            hierarchy=tuple(hierarchy),
            bundle=spec.get("parameters", {}).get("build_system") == "bundle",
            # craype=none: not a Cray PE build, so its compiler's name
            compiler=((spec.get("parameters", {}).get("craype") or "none") != "none"
                      and spec["parameters"]["craype"]
                      or (compilers[0]["name"] if compilers else ""))))
    # a readable unique key per root: name@version, then %compiler, then /hash
    for r in roots:
        r["key"] = f"{r['name']}@{r['version']}"
    for suffix in (lambda r: f"%{r['compiler']}", lambda r: f"/{r['hash'][:7]}"):
        counts: dict[str, int] = {}
        for r in roots:
            counts[r["key"]] = counts.get(r["key"], 0) + 1
        for r in roots:
            if counts[r["key"]] > 1:
                r["key"] += suffix(r)
    return sorted((RootSpec(**r) for r in roots), key=lambda r: r.key)


def core_compilers(env: SpackEnv) -> tuple[str, ...]:
    """The `modules: default: lmod: core_compilers` of a site's environment
    (spack-env/sites/<site>), from the modules.yaml its spack.yaml includes: an environment
    of a site (local/nwp) includes the site's ../modules.yaml. The first include that sets
    them wins, as Spack gives an earlier include precedence."""
    import yaml

    directory = env.directory
    manifest = directory / "spack.yaml"
    spack = (yaml.safe_load(manifest.read_text()) or {}).get("spack") or {} \
        if manifest.is_file() else {}
    includes = [i.get("path") if isinstance(i, dict) else i for i in spack.get("include") or []]
    for include in [i for i in includes if i and i.endswith("modules.yaml")] or ["modules.yaml"]:
        path = directory / include
        if not path.is_file():
            continue
        data = yaml.safe_load(path.read_text()) or {}
        lmod = ((data.get("modules") or {}).get("default") or {}).get("lmod") or {}
        if lmod.get("core_compilers"):
            return tuple(lmod["core_compilers"])
    return ()


def roots_of(env: SpackEnv, lock: pathlib.Path | None = None) -> list[RootSpec]:
    """The root specs of an environment's lock (`lock`: a release's copy; default the
    committed one), [] if it has none yet."""
    path = lock or env.committed_lock
    if not path.is_file():
        return []
    return root_specs(json.loads(path.read_text()), core_compilers(env))
