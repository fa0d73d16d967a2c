"""What Spack knows of an environment's concrete specs, as JSON on stdout, for the SBOM
(lib/iostack/deployment/sbom.py): run by `spack -e ENV python` on this file, so it imports nothing but
Spack and the standard library.

Per spec: name, version, DAG hash, its dependencies (hash and dependency types), whether
it is external (its prefix and the packages.yaml `extra_attributes` that name the OS
package) or installed (its prefix), the licences its recipe declares for it (`license()`
directives whose `when` it satisfies), and its sources as Spack fetches them: the main
archive (URL and sha256) or git checkout (URL and commit), each resource, each patch.
"""
import json
import os
import sys

import spack.deptypes
import spack.environment
import spack.fetch_strategy
import spack.repo


def fetcher_facts(fetcher) -> dict:
    """URL and checksum (or git commit) of a fetch strategy; {} for none."""
    if isinstance(fetcher, spack.fetch_strategy.GitFetchStrategy):
        return {"kind": "git", "url": fetcher.url, "commit": fetcher.commit,
                "tag": fetcher.tag, "branch": fetcher.branch}
    if isinstance(fetcher, spack.fetch_strategy.URLFetchStrategy):
        algo = getattr(fetcher, "digest", None) and "sha256"
        return {"kind": "url", "url": fetcher.url, algo or "sha256": fetcher.digest}
    return {}


def sources(spec) -> list:
    pkg = spec.package
    found = []
    if pkg.has_code:
        main = fetcher_facts(spack.fetch_strategy.for_package_version(pkg))
        if main:
            found.append({"name": spec.name, **main})
    else:
        # iostack's in-repo recipes record their source tree's sha256 (packages/spack_repo/
        # iostack/in_repo.py); other code-less recipes (compiler-wrapper) have a file resource
        tree = getattr(type(pkg), "SOURCE_SHA256", {}).get(str(spec.version))
        if tree:
            repo = spack.repo.PATH.get_repo(spec.namespace)
            found.append({"name": spec.name, "kind": "in-repo", "sha256": tree,
                          "path": os.path.relpath(pkg.in_repo_source, repo.root),
                          "repository": spec.namespace})
    for resource in pkg._get_needed_resources():
        facts = fetcher_facts(resource.fetcher)
        if facts:
            found.append({"name": resource.name, **facts})
    for patch in spec.patches:
        found.append({"name": getattr(patch, "path_or_url", None) or str(patch),
                      "kind": "patch", "url": getattr(patch, "url", None),
                      "sha256": patch.sha256})
    return found


def licenses(spec) -> list:
    cls = spack.repo.PATH.get_pkg_class(spec.fullname)
    return sorted({lic for when, lic in getattr(cls, "licenses", {}).items()
                   if spec.satisfies(when)})


def facts(spec) -> dict:
    out = {
        "name": spec.name,
        "version": str(spec.version),
        "hash": spec.dag_hash(),
        "namespace": spec.namespace,
        "homepage": getattr(spec.package, "homepage", None),
        "licenses": licenses(spec),
        "dependencies": sorted(
            ({"name": e.spec.name, "hash": e.spec.dag_hash(), "types": sorted(spack.deptypes.flag_to_tuple(e.depflag))}
             for e in spec.edges_to_dependencies()), key=lambda d: (d["name"], d["hash"])),
        "external": bool(spec.external),
    }
    if spec.external:
        out["prefix"] = spec.external_path
        out["extra_attributes"] = spec.extra_attributes
        out["installed"] = False
    else:
        out["installed"] = spec.installed
        out["prefix"] = spec.prefix if out["installed"] else None
        out["sources"] = sources(spec)
    return out


def main() -> None:
    env = spack.environment.active_environment()
    if env is None:
        sys.exit("sbom_spack.py: run it in an environment (spack -e ENV python ...)")
    specs: dict[str, object] = {}
    for root in env.concrete_roots():
        for spec in root.traverse(deptype="all"):
            specs.setdefault(spec.dag_hash(), spec)
    json.dump({"roots": [s.dag_hash() for s in env.concrete_roots()],
               "specs": [facts(s) for _, s in sorted(specs.items())]}, sys.stdout, indent=1,
              sort_keys=True)


main()
