"""A user's guide per release, <release>/guide/index.html, written by `bin/iostack deploy`
(and shipped in the release's image, as everything in the release is): one page, no
scripts, no network, for the user who asks what the release holds and how to use it.

From what the release itself records, never from the checkout as it is now:
- its packages and versions (its spack.lock: built here, or the site's external);
- its modules: for each package the modules that load it, in order (as
  etc/lmod/hierarchy.lua says), and what its module file loads in turn (its depends_on);
  the meta-modules and what they are for;
- how to build against it: CMake (find_package, the module puts the package on
  CMAKE_PREFIX_PATH), pkg-config, and the release's Spack upstream (upstream.py);
- the site's scratch and file systems (sites/<site>.yaml), with what each kind asks of jobs;
- the site's own ecCodes definitions (sites/<site>.yaml grib_definitions), where it has any;
- what changed since the release users had before it (releasediff.py).
"""
from __future__ import annotations

import html
import json
import pathlib
import re

from iostack.core import paths
from iostack.deployment import releasediff, releases, stack, upstream
from iostack.site import facts

GUIDE = pathlib.Path("guide") / "index.html"

#: what each kind of file system asks of a job's I/O (sites/schema.yaml's types)
ADVICE = {
    "lustre": "a parallel file system shared by every node: write large files in large "
              "blocks, few files per directory; stripe a file many ranks write over several "
              "OSTs (lfs setstripe -c), and keep small-file and metadata-heavy work off it",
    "gpfs": "a parallel file system shared by every node: write large blocks, few files "
            "per directory",
    "nvme": "node-local flash: fast and private to the node, emptied when the job ends; "
            "stage inputs in and results out (the nvme-stage module)",
    "xfs": "a local file system of the node",
    "ext4": "a local file system of the node",
    "nfs": "a network file system: home directories and software, not job I/O",
}


def _e(text: object) -> str:
    return html.escape(str(text))


def module_loads(modulefiles: pathlib.Path, module: str) -> list[str]:
    """What a module file of the release loads (Spack's autoload: its depends_on/load)."""
    for f in sorted(modulefiles.rglob(f"{module}.lua")):
        return re.findall(r'^\s*(?:depends_on|load)\("([^"]+)"\)', f.read_text(), re.M)
    return []


def meta_modules(modulefiles: pathlib.Path) -> list[tuple[str, str]]:
    """(name/version, its whatis Description) of the meta-modules (modulefiles/ of the
    checkout, copied into Core at deploy), newest version of each."""
    found = []
    for d in sorted((modulefiles / "Core").glob("*")):
        files = sorted(d.glob("*.lua"))
        if not files or not (paths.META_MODULES / d.name).is_dir():
            continue
        said = re.search(r'whatis\("Description: ([^"]*)"', files[-1].read_text())
        # a Lua description may go on in a concatenation: its first literal, without the joint
        found.append((f"{d.name}/{files[-1].stem}", said.group(1).rstrip(", ") if said else ""))
    return found


def previous_release(root: pathlib.Path, release: releases.Release) -> releases.Release | None:
    """The release users had before this one: the current release if older (a deploy writes
    the guide before switching), else the newest older one that was built."""
    older = [r for r in releases.listing(root) if r.created < release.created and not r.problem
             and r.verdict not in (releases.BUILD_FAILED, releases.BUILDING)
             and (r.path / releases.LOCK).is_file()]
    current = releases.current(root)
    for r in older:
        if r.id == current:
            return r
    return older[-1] if older else None


def site_storage(site: str) -> list[tuple[str, str, str, str]]:
    """(node group, scratch, its file system, advice) from the site's facts."""
    try:
        facts_ = facts.load(site)
    except facts.FactsError:
        return []
    rows = []
    for group in facts_.nodes.values():
        fs = facts_.file_system_of(group.scratch, group.name) if group.scratch else None
        kind = (fs or {}).get("type", "")
        where = f"{fs['mount']} ({kind}{', shared' if fs.get('shared') else ', node-local'})" \
            if fs else "not declared"
        rows.append((group.name, group.scratch or "the job's working directory", where,
                     ADVICE.get(kind, "")))
    for fs in facts_.file_systems:
        if not any(fs["mount"] in row[2] for row in rows):
            rows.append(("(all)", "", f"{fs['mount']} ({fs.get('type', '?')})",
                         ADVICE.get(fs.get("type", ""), "")))
    return rows


def grib_definitions(site: str) -> str:
    """What a user reads of the site's own ecCodes definitions (HTML; empty without any)."""
    facts_ = facts.load(site)
    if not facts_.grib_definitions:
        return ""
    where = "".join(f"<li><code>{_e(d)}</code></li>" for d in facts_.grib_definition_dirs)
    where += "".join(f"<li>package <code>{_e(p)}</code> (<code>&lt;its prefix&gt;/"
                     f"{_e(facts.PACKAGE_DEFINITIONS)}</code>)</li>"
                     for p in facts_.grib_definition_packages)
    return f"""
<h3 id="grib-definitions">The site's GRIB definitions</h3>
<p>This site's GRIB has parameters only its own ecCodes definitions name. The ecCodes module
(and every module that loads it, FDB's too) puts them on
<code>ECCODES_EXTRA_DEFINITION_PATH</code>, searched before ecCodes' own:</p>
<ul>{where}</ul>
<p><code>codes_info -d</code> shows the path in use; <code>grib_ls -p paramId,shortName
FILE</code> shows a parameter they name. Without them the same field reads as paramId 0,
shortName <code>unknown</code>, and FDB would archive it as <code>param=0</code>.</p>"""


def render(root: pathlib.Path, release: releases.Release, core_compilers=()) -> str:
    lock = json.loads((release.path / releases.LOCK).read_text())
    specs = lock["concrete_specs"]
    roots = stack.root_specs(lock, core_compilers)
    core = root / releases.CURRENT / "modulefiles" / "Core"
    pinned = release.path / "modulefiles" / "Core"
    meta = release.meta
    out = [f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>iostack release {_e(release.id)}: user's guide</title>
<style>
body {{ font-family: sans-serif; max-width: 70em; margin: 1em auto; padding: 0 1em; }}
table {{ border-collapse: collapse; margin: 0.5em 0; }}
th, td {{ border: 1px solid #bbb; padding: 0.2em 0.5em; text-align: left; vertical-align: top; }}
th {{ background: #eee; }}
pre {{ background: #f4f4f4; padding: 0.5em; white-space: pre-wrap; overflow-wrap: anywhere; }}
.added {{ color: #060; }} .removed {{ color: #a00; }}
</style></head><body>
<h1>iostack release <code>{_e(release.id)}</code></h1>
<p id="summary">Site <b>{_e(release.site)}</b> (environment {_e(meta.get('env', release.site))}),
built {_e(release.created)} from commit <code>{_e(meta.get('commit', '?')[:12])}</code>:
{len(roots)} packages you load, {len(specs)} specs in all.</p>
<nav><a href="#modules">Modules</a> · <a href="#build">Building</a> ·
<a href="#storage">Scratch and file systems</a> · <a href="#changes">Changes</a> ·
<a href="#packages">Every package</a></nav>

<h2 id="modules">Modules</h2>
<p>Put the release on your module path (<code>current</code> follows the centre's switches;
the second line keeps this release):</p>
<pre>module use {_e(core)}
module use {_e(pinned)}   # this release only</pre>
<table><tr><th>package</th><th>version</th><th>load with</th><th>its module loads</th></tr>"""]
    for spec in roots:
        chain = " ".join(spec.modules_to_load())
        has_module = any(release.modulefiles.rglob(f"{spec.module}.lua"))
        loads = ", ".join(module_loads(release.modulefiles, spec.module)) or "—"
        how = f"<code>module load {_e(chain)}</code>" if has_module or not spec.is_external \
            else f"none: the system's, in {_e(spec.external_prefix or '')}"
        out.append(f"<tr><td>{_e(spec.name)}</td><td>{_e(spec.version)}</td>"
                   f"<td>{how}</td><td>{_e(loads)}</td></tr>")
    out.append("</table>")
    metas = meta_modules(release.modulefiles)
    if metas:
        out.append("<p>Modules of the centre:</p><table><tr><th>module</th><th>what it is "
                   "for</th></tr>" + "".join(f"<tr><td><code>{_e(n)}</code></td><td>{_e(d)}"
                                             "</td></tr>" for n, d in metas) + "</table>")
    out.append(grib_definitions(release.site))
    scope = upstream.scope_dir(release.path)
    out.append(f"""
<h2 id="build">Building against the release</h2>
<h3>CMake</h3>
<p>Each module puts its package on <code>CMAKE_PREFIX_PATH</code> and sets
<code>&lt;NAME&gt;_ROOT</code>, so <code>find_package</code> finds it:</p>
<pre>module load {_e(' '.join(next((s.modules_to_load() for s in roots if s.name == 'fdb'), ['fdb'])))}
# CMakeLists.txt:  find_package(fdb5 REQUIRED)   target_link_libraries(app PRIVATE fdb5)
cmake -S . -B build &amp;&amp; cmake --build build</pre>
<p>Without the module, CMake may find the operating system's own copy and say nothing:
check the version it reports.</p>
<h3>pkg-config</h3>
<pre>pkg-config --cflags --libs eccodes</pre>
<h3>Your own Spack, on top of the release</h3>
<p>The release is a Spack upstream: your Spack (v1.1) reuses its installs and builds only
your packages, in your own install tree. One option gives it the release:</p>
<pre>spack -C {_e(scope)} spec -I my-model   # [^]: the release's
spack -C {_e(scope)} install my-model</pre>
<p>Or, for every command, add to <code>~/.spack/include.yaml</code>:</p>
<pre>include:
- {_e(scope)}</pre>
<p>A version the release does not hold is built in your tree; the release is never
written to. <a href="../{upstream.SCOPE}/README.md">{upstream.SCOPE}/README.md</a> says
more.</p>
""")
    storage = site_storage(release.site)
    out.append('<h2 id="storage">Scratch and file systems</h2>')
    if storage:
        out.append("<table><tr><th>nodes</th><th>scratch</th><th>file system</th><th>what it "
                   "asks of your I/O</th></tr>" + "".join(
                       f"<tr><td>{_e(g)}</td><td><code>{_e(s)}</code></td><td>{_e(f)}</td>"
                       f"<td>{_e(a)}</td></tr>" for g, s, f, a in storage) + "</table>")
    else:
        out.append(f"<p>Site {_e(release.site)} declares no file systems.</p>")
    previous = previous_release(root, release)
    out.append('<h2 id="changes">Changes</h2>')
    if previous is None:
        out.append("<p>The first release of this deployment.</p>")
    else:
        d = releasediff.diff(previous, release)
        n = len(d.changes)
        out.append(f"<p>Since <code>{_e(previous.id)}</code>: {n} change{'s' * (n != 1)}, "
                   f"{d.unchanged} packages the same.</p>")
        if d.changes:
            out.append("<table><tr><th>change</th><th>package</th><th>before</th><th>now</th>"
                       "<th>why</th></tr>" + "".join(
                           f'<tr class="{_e(c.kind)}"><td>{_e(c.kind)}</td><td>{_e(c.name)}</td>'
                           f"<td>{_e(c.old)}</td><td>{_e(c.new)}</td><td>{_e(c.detail)}</td></tr>"
                           for c in d.changes) + "</table>")
    out.append('<h2 id="packages">Every package</h2><table><tr><th>package</th>'
               "<th>version</th><th>hash</th><th>where</th></tr>")
    for h, spec in sorted(specs.items(), key=lambda kv: (kv[1]["name"], str(kv[1]["version"]))):
        external = (spec.get("external") or {}).get("path")
        where = f"{external} (the system's)" if external else \
            f"{root}/opt/{spec['name']}-{spec['version']}-{h[:7]}"
        out.append(f"<tr><td>{_e(spec['name'])}</td><td>{_e(spec['version'])}</td>"
                   f"<td><code>{_e(h[:7])}</code></td><td><code>{_e(where)}</code></td></tr>")
    out.append("</table>\n</body></html>\n")
    return "\n".join(out)


def write(root: pathlib.Path, release: releases.Release, core_compilers=()) -> pathlib.Path:
    out = release.path / GUIDE
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(root, release, core_compilers))
    return out
