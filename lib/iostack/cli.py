"""bin/iostack: set-up, tests and a site's deployment.

The one place that reads the process environment (iostack.core.settings: each variable and
its meaning) and the command line, builds the Target a command acts on, and turns domain
errors into a line and an exit status. It also decides what is printed: the library logs
through `logging` (a logger per module) and never prints (configure_output)."""
import argparse
import dataclasses
import logging
import os
import pathlib
import sys

from iostack.core import account, paths, trust
from iostack.core.errors import IostackError
from iostack.core.process import become, run
from iostack.core.settings import Settings
from iostack.site import facts
from iostack.site.target import Target
from iostack.spack import runner


class _Console(logging.Handler):
    """The library's messages: information on stdout, warnings and errors on stderr, each
    as `iostack: <message>` unless logged bare (a command line, a table). The streams are
    looked up at each message, so redirections and pytest's capture see them; each line is
    flushed, so it comes before the output of the command it announces."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if not getattr(record, "bare", False):
                text = f"iostack: {text}"
            stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            stream.write(text + "\n")
            stream.flush()
        except Exception:
            self.handleError(record)


def configure_output() -> None:
    """Print the library's messages as bin/iostack always has (idempotent)."""
    logger = logging.getLogger("iostack")
    if not any(isinstance(h, _Console) for h in logger.handlers):
        logger.addHandler(_Console())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def render(verdict) -> int:
    """A regression's verdict (iostack.regression.nightly.Verdict), a line per finding, on
    stdout with the run's own output; its exit code."""
    for kind, text in verdict.findings:
        print(f"iostack: {text}" if kind == "note" else f"iostack: {kind}: {text}", flush=True)
    return verdict.rc


def target(settings: Settings, args, env: bool = False) -> Target:
    """What a site command acts on: the checked site, its Spack environment (--env), the
    deployment root (--root, IOSTACK_ROOT, deploy/<site>), the ReFrame system (--system),
    the Slurm account its jobs charge (--account)."""
    site = facts.check_site(args.site)
    return Target(settings=settings,
                  env=facts.spack_env(site, getattr(args, "env", None) if env else None),
                  root=settings.deploy_root(site, args.root),
                  system=getattr(args, "system", None) or None,
                  account=getattr(args, "account", None) or None)


def cmd_setup(settings, args):
    from iostack.offline import setup

    return setup.main(settings, args)


def cmd_test(settings, args):
    from iostack.offline import setup

    setup.for_tests(settings)  # the tests' system packages and Python tools, as set-up installs them
    return run([settings.python, "-m", "pytest", *args.pytest_args], cwd=paths.REPO,
               check=False).returncode


def cmd_sites(settings, args):
    for site in facts.spack_sites():
        print(site)
    return 0


def _require_spack(settings: Settings):
    runner.locate(settings)  # SpackMissing says what is missing


def cmd_spack(settings, args):
    from iostack.core import filesystems
    from iostack.deployment import releases

    t = target(settings, args, env=True)
    _require_spack(settings)
    spack_args = args.spack_args[1:] if args.spack_args[:1] == ["--"] else args.spack_args
    current = releases.current(t.root) if t.root.is_dir() and filesystems.read_only(t.root) \
        else None
    if current:
        # a deployment mounted read-only from a release's image: that release's environment
        t = t.with_release(releases.find(t.root, current).path)
    return runner.spack(spack_args, t, check=False).returncode


def cmd_deploy(settings, args):
    from iostack.deployment import deploy
    from iostack.regression import nightly

    t = target(settings, args, env=True)
    _require_spack(settings)
    if not args.skip_regression:
        nightly.require_node_packages(args.mode, args.reframe_args)
        nightly.job_environment(t)     # a required account refused before anything is built

    def regression(release: Target, extras):
        # the same run as the nightly: session extras, results DB, zero-test-case check
        return render(nightly.run(release, extra=[*extras, *args.reframe_args], mode=args.mode))

    return deploy.deploy(t, deploy.check_buildcache_arg(args.buildcache),
                         None if args.skip_regression else regression,
                         switch=not args.no_switch)


def cmd_releases(settings, args):
    from iostack.deployment import releases

    t = target(settings, args)
    if not releases.listing(t.root):
        print(f"iostack: no releases in {releases.releases_dir(t.root)}: "
              f"bin/iostack deploy --site {t.site} makes one")
        return 0
    print(releases.table(t.root))
    return 0


def cmd_releases_diff(settings, args):
    from iostack.deployment import releasediff

    t = target(settings, args)
    old, new = (_named_release(t.root, name) for name in (args.old, args.new))
    print(releasediff.diff(old, new).text())
    return 0


def _named_release(root, name):
    """A release by id, or `current` / `previous` (the one users had before it)."""
    from iostack.deployment import releases

    if name in ("current", "previous"):
        found = releases.current(root) if name == "current" else releases.previous(root)
        if found is None:
            raise releases.ReleaseError(f"no {name} release in {root} (bin/iostack releases "
                                        "lists them)")
        name = found
    return releases.find(root, name)


def cmd_switch(settings, args):
    from iostack.deployment import releases

    t = target(settings, args)
    old, seconds = releases.switch(t.root, args.release, force=args.force)
    print(f"iostack: current: {old or '(none)'} -> {args.release} ({seconds * 1000:.1f} ms)")
    return 0


def cmd_prune(settings, args):
    from iostack.deployment import releases

    t = target(settings, args)
    if not (args.keep_installs or args.dry_run):
        _require_spack(settings)
    gone, kept = releases.prune(t, args.keep, dry_run=args.dry_run,
                                garbage=not args.keep_installs)
    what = "would remove" if args.dry_run else "removed"
    print(f"iostack: {what} {len(gone)} release(s): {', '.join(gone) or 'none'}; "
          f"kept {len(kept)}: {', '.join(kept)}")
    return 0


def cmd_mirror_create(settings, args):
    from iostack.spack import mirrors

    t = target(settings, args, env=True)
    _require_spack(settings)
    dest = pathlib.Path(args.directory).resolve() if args.directory else t.root / "mirror"
    mirrors.create_source_mirror(t, dest)
    return 0


def cmd_mirror_register(settings, args):
    from iostack.spack import config

    def named(value: str) -> tuple[str, str]:
        name, sep, url = value.partition("=")
        if not (sep and name and url):
            raise IostackError(f"{value!r}: give a mirror as NAME=URL")
        return name, url

    mirrors = [config.Mirror(*named(v), binary=False) for v in args.source]
    mirrors += [config.Mirror(*named(v), binary=True, signed=not args.unsigned)
                for v in args.buildcache]
    path = config.registered_mirrors_file(settings.cache)
    text = config.mirrors_yaml(mirrors, replace=args.only, written_by="`bin/iostack mirror register`")
    if path.is_file() and path.read_text() == text:
        print(f"iostack: {path}: unchanged")
        return 0
    config.write_mirrors(path, mirrors, replace=args.only, written_by="`bin/iostack mirror register`")
    print(f"iostack: {path}: written ({len(mirrors)} mirror(s), every site on this node uses them)")
    return 0


def cmd_buildcache_push(settings, args):
    from iostack.spack import mirrors

    t = target(settings, args, env=True)
    _require_spack(settings)
    dest = pathlib.Path(args.directory).resolve() if args.directory else t.root / "buildcache"
    mirrors.push(t, dest, pathlib.Path(args.key).resolve() if args.key else None)
    return 0


def cmd_bundle(settings, args):
    from iostack.offline import bundle

    t = target(settings, args)
    _require_spack(settings)
    bundle.write(t, pathlib.Path(args.output).resolve(),
                 pathlib.Path(args.buildcache).resolve() if args.buildcache else None)
    return 0


def cmd_nightly(settings, args):
    from iostack.deployment import image, releases
    from iostack.regression import nightly

    t = target(settings, args)
    # a deployment with releases: the current one (resolved: a switch does not move the run)
    tree = releases.tree_under_test(t.root)
    t = t.with_release(tree if tree != t.root else None)
    extras = releases.session_extras(tree)
    if args.image and not args.state:
        raise IostackError("--image: a mounted image is read-only; give --state DIR for the "
                           "run's stage, reports and results DB")
    if args.state:
        t = dataclasses.replace(t, state=pathlib.Path(args.state).resolve())
    if args.image:
        digest = image.verify_mounted(pathlib.Path(args.image).resolve(), tree)
        extras += ["--session-extras", f"image_sha256={digest}"]
    return render(nightly.run(t, extra=[*extras, *args.reframe_args], mode=args.mode))


def _release(root, release_id):
    """The named release of the deployment, else its current one."""
    from iostack.deployment import releases

    if release_id:
        return releases.find(root, release_id)
    current = releases.current(root)
    if current is None:
        raise releases.ReleaseError(f"no current release in {root}: name one (bin/iostack "
                                    "releases lists them)")
    return releases.find(root, current)


def cmd_sbom(settings, args):
    from iostack.deployment import sbom

    t = target(settings, args)
    _require_spack(settings)
    release = _release(t.root, args.release)
    text = sbom.generate(t, release)
    if args.output:
        pathlib.Path(args.output).write_text(text)
        print(f"iostack: SBOM of release {release.id}: {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_image(settings, args):
    from iostack.deployment import image

    t = target(settings, args)
    release = _release(t.root, args.release)
    out, digest = image.build(release, t, pathlib.Path(args.output).resolve()
                              if args.output else None)
    print(f"iostack: image of release {release.id}: {out}\n  sha256 {digest}\n"
          f"iostack: mount it (no root needed) where the release was built for:\n"
          f"  squashfuse {out} {t.root}\n  module use {t.root}/current/modulefiles/Core")
    return 0


def cmd_report(settings, args):
    from iostack.deployment import roots
    from iostack.regression import report

    t = target(settings, args)
    roots.require_results(t)
    out = pathlib.Path(args.out).resolve() if args.out else None
    return report.main(t, out, args.period)


def cmd_record_baseline(settings, args):
    from iostack.deployment import roots
    from iostack.regression import baseline

    t = target(settings, args)
    roots.require_results(t)
    refs = pathlib.Path(args.references_dir).resolve() if args.references_dir else None
    return baseline.main(t, args.check, args.session, refs, args.lower, args.upper,
                         args.sessions)


def cmd_store_report(settings, args):
    from iostack.regression import results

    t = target(settings, args)
    if not (t.root / "reframe").is_dir():
        raise IostackError(f"no deployment root at {t.root} (no {t.root / 'reframe'}): check "
                           "--root / IOSTACK_ROOT")
    for report in args.reports:
        uuid = results.store(t, pathlib.Path(report).resolve())
        print(f"iostack: session {uuid} of {report} stored in {t.results_db}")
    return 0


def cmd_counts(settings, args):
    from iostack.core import provenance
    from iostack.regression import counts

    if args.bench:
        # a build of fdb-archive-bench outside a release (Debian's FDB, a developer's): its
        # references are named, never looked up by build
        if not args.references:
            raise IostackError("counts --bench: give --references FILE (the references of "
                               "that build)")
        bench = pathlib.Path(args.bench).resolve()
        if not bench.is_file():
            raise IostackError(f"counts --bench: no such file: {bench}")
        programs = counts.Programs(bench=bench)
    else:
        t = target(settings, args)
        programs = counts.release_programs(_release(t.root, args.release).path, args.site)
    # a counted program's environment is its own (counts.alone_env), but for the shims
    programs = dataclasses.replace(programs, env={**programs.env, **counts.injected(os.environ)})
    ref = (pathlib.Path(args.references).resolve() if args.references
           else counts.reference_file(programs.build))
    keep = pathlib.Path(args.keep).resolve() if args.keep else None
    if keep:
        keep.mkdir(parents=True, exist_ok=True)
    commit = provenance.git_commit() if args.action == "record" else None
    json_out = pathlib.Path(args.json).resolve() if args.json else None
    return counts.main(programs, args.action, ref, args.runs, args.workload or None, keep, commit,
                       supersede=not args.references, json_out=json_out)


def cmd_site_init(settings, args):
    from iostack.offline import siteinit

    return siteinit.main(settings, args.name, dry_run=args.dry_run, record=args.record,
                         records=args.from_records, description=args.description)


def cmd_site_generate(settings, args):
    from iostack.site import generate

    sites = [facts.check_site(s) for s in args.sites] or facts.names()
    if args.check:
        stale = [g.shown for s in sites for g in generate.stale(s)]
        orphans = [str(p.relative_to(paths.REPO)) for p in generate.orphans()] \
            if not args.sites else []
        for shown in stale:
            print(f"iostack: {shown} differs from what its facts give: bin/iostack site "
                  "generate, and commit it")
        for shown in orphans:
            print(f"iostack: {shown} is generated for a site with no facts: remove it")
        return 1 if stale or orphans else 0
    for site in sites:
        for g in generate.write(site):
            print(f"iostack: {g.shown} written from sites/{site}.yaml")
    return 0


def cmd_lock(settings, args):
    from iostack.spack import locks

    _require_spack(settings)
    chosen = [facts.check_spack_env(name) for name in args.sites] or facts.all_spack_envs()
    print(f"iostack: concretizing {', '.join(map(str, chosen))} from scratch (side by side)",
          flush=True)
    failed = 0
    for env, result in locks.fresh_locks(settings, chosen).items():
        if isinstance(result, locks.ConcretizationFailed):
            failed += 1
            print(f"iostack: {env}: concretization failed: {result}", flush=True)
            continue
        lock, seconds = result
        diff = locks.differences(locks.committed_lock(env), lock)
        roots = ", ".join(r["spec"] for r in lock["roots"])
        print(f"iostack: {env}: concretized in {seconds:.0f} s; roots: {roots}", flush=True)
        if not diff:
            print(f"iostack: {env}: spack.lock is fresh", flush=True)
            if args.update:
                locks.write(env, lock)  # same content, canonical (reviewable) layout
        elif args.update:
            locks.write(env, lock)
            print(f"iostack: {env}: spack.lock updated ({len(diff)} changes)")
        else:
            failed += 1
            print(f"iostack: {env}: spack.lock is STALE:\n  " + "\n  ".join(diff))
    return 1 if failed else 0


def parser():
    ap = argparse.ArgumentParser(prog="iostack", description=__doc__)
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("setup", help="install system packages, the Python tools and Spack")
    p.add_argument("--skip-apt", action="store_true",
                   help="do not run apt; fail with the apt line if packages are missing")
    p.add_argument("--with", dest="with_", action="append", default=[],
                   choices=["nightly", "tests"],
                   help="also what the nightly regression's checks run on this node "
                        "(nightly), or the test suite's tools (tests); repeatable")
    p.add_argument("--spack-bundle", metavar="DIR",
                   help="offline bundle to set up from instead of the network: the pinned "
                        "Spack and spack-packages archives, a source mirror, SHA256SUMS "
                        "(default: $IOSTACK_SPACK_BUNDLE)")
    p.add_argument("--keyring", action="append", metavar="FILE",
                   help="public key(s) of the release key you hold, which a bundle's "
                        "SHA256SUMS.asc must be signed with (besides the fingerprints in "
                        "pins.json `release_keys`); repeatable")
    p.add_argument("--insecure-unsigned", action="store_true",
                   help="use a bundle that nobody you trust vouches for (no valid signature, "
                        "and content this checkout cannot check); its build cache keys are "
                        "not trusted")
    p.set_defaults(func=cmd_setup)

    p = sub.add_parser("test", help="run the repository's test suite (pytest); every argument "
                                    "after `test` is pytest's (`test -n 0 tests/unit`)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_test)

    p = sub.add_parser("sites", help="list the sites")
    p.set_defaults(func=cmd_sites)

    def account_arg(p):
        p.add_argument("--account", metavar="NAME",
                       help="Slurm account the jobs charge (default: the site's facts, "
                            "sites/<site>.yaml account.name)")

    def site_args(p, env=False):
        p.add_argument("--site", default="local", help="site name (default: local)")
        p.add_argument("--root", help="deployment root (default: $IOSTACK_ROOT or deploy/<site>)")
        if env:
            p.add_argument("--env", metavar="NAME",
                           help="another Spack environment of the site than its default: "
                                "spack-env/sites/<site>/NAME (local: nwp, with OpenIFS)")

    p = sub.add_parser("deploy", help="install a site's stack, generate its modules, run its regression")
    site_args(p, env=True)
    p.add_argument("--skip-regression", action="store_true")
    p.add_argument("--buildcache", metavar="DIR",
                   help="install from this signed build cache only, building nothing; "
                        "every binary's signature is checked against the keys this node "
                        "trusts, never against keys the cache ships")
    p.add_argument("--mode", default="deploy",
                   help="ReFrame mode of the release's regression (default deploy: correctness "
                        "checks a node set up for deploying runs; nightly, weekly)")
    account_arg(p)
    p.add_argument("--no-switch", action="store_true",
                   help="build and validate the release, but leave `current` where it is")
    p.add_argument("reframe_args", nargs="*", help="extra ReFrame options (after --)")
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser("releases", help="a deployment's releases: id, commit, lock, date, "
                                        "regression verdict, which is current")
    site_args(p)
    p.set_defaults(func=cmd_releases)
    rsub = p.add_subparsers(dest="releases_command", metavar="{diff}")
    d = rsub.add_parser("diff", help="packages added, removed, upgraded and rebuilt between two "
                                     "releases, from their locks")
    # SUPPRESS: given before `diff`, the parent's --site/--root stand
    d.add_argument("--site", default=argparse.SUPPRESS, help="site name (default: local)")
    d.add_argument("--root", default=argparse.SUPPRESS, help="deployment root")
    d.add_argument("old", help="release id, or current, or previous")
    d.add_argument("new", help="release id, or current, or previous")
    d.set_defaults(func=cmd_releases_diff)

    p = sub.add_parser("switch", help="make a release current (also an older one: rollback)")
    site_args(p)
    p.add_argument("release", help="release id (bin/iostack releases lists them)")
    p.add_argument("--force", action="store_true",
                   help="switch even to a release whose regression did not pass")
    p.set_defaults(func=cmd_switch)

    p = sub.add_parser("prune", help="remove old releases (never the current one or the one "
                                     "before it) and the installs no remaining release uses")
    site_args(p)
    p.add_argument("--keep", type=int, required=True, metavar="N",
                   help="keep the N newest releases, besides the current and previous ones")
    p.add_argument("--dry-run", action="store_true", help="say what would go; change nothing")
    p.add_argument("--keep-installs", action="store_true",
                   help="remove release trees only, no `spack gc` of the install tree")
    p.set_defaults(func=cmd_prune)

    p = sub.add_parser("nightly", help="run a site's ReFrame regression")
    site_args(p)
    p.add_argument("--system", help="ReFrame system (default: the site; e.g. local-slurm)")
    p.add_argument("--mode", default="nightly", help="ReFrame mode (deploy, nightly, weekly)")
    account_arg(p)
    p.add_argument("--image", metavar="FILE",
                   help="the release runs from this image, mounted at the root: check it is "
                        "what is mounted and record its sha256 with the session")
    p.add_argument("--state", metavar="DIR",
                   help="where the run writes its stage, reports and results DB (default: "
                        "<root>/reframe; needed for a release mounted from its image)")
    p.add_argument("reframe_args", nargs="*", help="extra ReFrame options (after --)")
    p.set_defaults(func=cmd_nightly)

    p = sub.add_parser("sbom", help="CycloneDX 1.6 SBOM of a release (deploy writes one into "
                                    "each release)")
    site_args(p)
    p.add_argument("release", nargs="?", help="release id (default: the current one)")
    p.add_argument("-o", "--output", help="write it here (default: standard output)")
    p.set_defaults(func=cmd_sbom)

    p = sub.add_parser("image", help="a release as one reproducible squashfs image, mounted "
                                     "with squashfuse at the deployment root")
    site_args(p)
    p.add_argument("release", nargs="?", help="release id (default: the current one)")
    p.add_argument("-o", "--output",
                   help="the image file (default: <root>/images/<release>.squashfs)")
    p.set_defaults(func=cmd_image)

    p = sub.add_parser("report", help="HTML page and charts of the stored nightly results")
    site_args(p)
    p.add_argument("--system", help="ReFrame system whose config reads the DB (default: the site)")
    p.add_argument("--out", help="output directory (default: <root>/reframe/report)")
    p.add_argument("--period", default="19700101T0000+0000:now",
                   help="ReFrame time period of the sessions to show (e.g. now-30d:now)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("record-baseline",
                       help="write a system's stored perf values into reframe-tests/references/")
    site_args(p)
    p.add_argument("--system", help="ReFrame system (default: the site)")
    p.add_argument("--check", action="append", default=[],
                   help="check class to record (repeatable; default: all with references)")
    p.add_argument("--session", action="append", default=[],
                   help="stored session UUID (repeatable: the median of the named sessions; "
                        "default: the latest on the system)")
    p.add_argument("--sessions", type=int, default=1, metavar="N",
                   help="record the median of the last N sessions' values (default: 1)")
    p.add_argument("--lower", type=float,
                   help="tolerated fraction below the value for gated variables (e.g. 0.3)")
    p.add_argument("--upper", type=float,
                   help="tolerated fraction above the value for gated variables")
    p.add_argument("--references-dir", help="where the YAML files are (default: reframe-tests/references)")
    p.set_defaults(func=cmd_record_baseline)

    p = sub.add_parser("store-report",
                       help="store run reports whose session the results DB missed")
    site_args(p)
    p.add_argument("--system", help="ReFrame system whose config reads the DB (default: the site)")
    p.add_argument("reports", nargs="+", help="ReFrame JSON run reports (<root>/reframe/reports/)")
    p.set_defaults(func=cmd_store_report)

    p = sub.add_parser("counts", help="work counts per field (instructions, system calls, "
                       "bytes, syncs) of the timed programs: record references or check them")
    p.add_argument("action", choices=["record", "check"])
    site_args(p)
    p.add_argument("--release", help="release to count (default: the current one)")
    p.add_argument("--bench", metavar="PATH",
                   help="count this fdb-archive-bench instead of the release's (with --references)")
    p.add_argument("--references", metavar="FILE",
                   help="reference file (default: reframe-tests/references/counts/"
                        "<site>-<hash of the release's fdb-archive-bench>.yaml)")
    p.add_argument("--runs", type=int, default=3, metavar="N",
                   help="record: runs whose median and spread are recorded (default: 3)")
    # the names are counts.WORKLOADS': not imported here, since set-up parses this before
    # its venv (and PyYAML) exists; a wrong name is refused with the list
    p.add_argument("--workload", action="append",
                   help="only this workload (repeatable; default: all of the references)")
    p.add_argument("--keep", metavar="DIR",
                   help="keep the runs' inputs and callgrind/strace outputs under DIR")
    p.add_argument("--json", metavar="FILE",
                   help="check: also write the counts measured and those that moved to FILE")
    p.set_defaults(func=cmd_counts)

    p = sub.add_parser("site", help="a new site")
    ssub = p.add_subparsers(dest="site_command", required=True)
    p = ssub.add_parser("init", help="describe this node as a new site from what Spack, ReFrame "
                                     "and Slurm detect: sites/NAME.yaml, spack-env/sites/NAME/, "
                                     "ansible/inventories/NAME/ (refuses an existing NAME)")
    p.add_argument("name", help="the new site's name")
    p.add_argument("--description", help="one line for the facts (default: OS and host name)")
    p.add_argument("--dry-run", action="store_true", help="show what was found; write nothing")
    p.add_argument("--record", type=pathlib.Path, metavar="DIR",
                   help="also keep what each tool printed in DIR")
    p.add_argument("--from-records", type=pathlib.Path, metavar="DIR",
                   help="make the site from a --record DIR instead of detecting")
    p.set_defaults(func=cmd_site_init)

    p = ssub.add_parser("generate", help="write what every tree reads of a site from its "
                                         "facts (reframe-tests/config/<site>.py)")
    p.add_argument("sites", nargs="*", help="sites (default: every site with facts)")
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 naming each generated file that differs")
    p.set_defaults(func=cmd_site_generate)

    p = sub.add_parser("lock", help="check (or --update) sites' committed spack.lock")
    p.add_argument("sites", nargs="*", help="sites, or site/env for another environment of a "
                                           "site (default: all, with their environments)")
    p.add_argument("--update", action="store_true", help="write the fresh lock")
    p.set_defaults(func=cmd_lock)

    p = sub.add_parser("mirror", help="a site's source mirror")
    msub = p.add_subparsers(dest="mirror_command", required=True)
    p = msub.add_parser("create", help="fetch the sources of everything the site's lock "
                                       "builds into a Spack source mirror")
    site_args(p, env=True)
    p.add_argument("-d", "--directory", help="where (default: <root>/mirror)")
    p.set_defaults(func=cmd_mirror_create)
    p = msub.add_parser("register", help="the mirrors and build caches every site on this node "
                                         "uses (<cache>/spack-config/mirrors.yaml)")
    p.add_argument("--source", action="append", default=[], metavar="NAME=URL",
                   help="a source mirror (repeatable)")
    p.add_argument("--buildcache", action="append", default=[], metavar="NAME=URL",
                   help="a binary build cache (repeatable)")
    p.add_argument("--unsigned", action="store_true", help="its binaries are not signed")
    p.add_argument("--only", action="store_true",
                   help="these and no other, not even Spack's public mirror (mirrors::)")
    p.set_defaults(func=cmd_mirror_register)

    p = sub.add_parser("buildcache", help="a site's signed binary build cache")
    bsub = p.add_subparsers(dest="buildcache_command", required=True)
    p = bsub.add_parser("push", help="push the site's installed specs, signed")
    site_args(p, env=True)
    p.add_argument("-d", "--directory", help="where (default: <root>/buildcache)")
    p.add_argument("--key", help="secret key file to sign with (default: this node's "
                                 "iostack key, created on first use)")
    p.set_defaults(func=cmd_buildcache_push)

    p = sub.add_parser("bundle", help="one file for an air-gapped node: the repository, the "
                                      "pinned Spack, the site's source mirror and build cache")
    site_args(p)
    p.add_argument("-o", "--output", required=True, help="the bundle file to write (a tar)")
    p.add_argument("--buildcache", metavar="DIR",
                   help="build cache to include (default: <root>/buildcache, pushed first)")
    p.set_defaults(func=cmd_bundle)

    p = sub.add_parser("spack", help="run spack in a site's environment with iostack's config")
    site_args(p, env=True)
    p.add_argument("spack_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_spack)
    return ap


#: What root runs as the service account (iostack.core.account): every command that builds
#: with Spack, runs ReFrame or a deployment's programs, or writes a deployment root. Root
#: itself runs set-up, the test suite, and what writes this checkout (locks, site files,
#: references) or the node's configuration (the registered mirrors).
AS_ACCOUNT = frozenset({"deploy", "releases", "switch", "prune", "nightly", "sbom", "image",
                        "report", "store-report", "counts", "buildcache", "bundle", "spack",
                        "mirror create"})
#: What root runs itself; every command is in one of the two (tests/unit/test_account.py).
AS_ROOT = frozenset({"setup", "test", "sites", "site", "lock", "mirror register",
                     "record-baseline"})
#: of those, what writes a deployment root's releases: an existing root must be the account's
WRITES_RELEASES = frozenset({"deploy", "switch", "prune"})
#: and what writes a deployment root it may be the first to use: root makes a missing one the
#: account's (reading commands never make one: iostack.deployment.roots)
MAKES_ROOT = frozenset({"deploy", "nightly", "spack", "buildcache", "mirror create", "bundle",
                        "image"})


def command_name(args) -> str:
    """`deploy`, or a command with a subcommand whose kinds differ: `mirror create`."""
    return f"mirror {args.mirror_command}" if args.command == "mirror" else args.command


def as_service_account(settings: Settings, args, argv: list[str]) -> None:
    """Run this command line again as the service account (never returns), once what the
    account needs is checked: it exists, it can read this checkout, the venv and Spack, and
    it owns its state and the deployment root it will write."""
    name = command_name(args)
    acct = account.require(settings.user, name)
    account.require_reachable([paths.REPO, settings.venv, settings.spack_tree,
                               settings.packages_tree, settings.cache], acct, name)
    state = account.own_directory(settings.account_state(acct.name), acct, mode=0o700)
    if getattr(args, "site", None):
        root = settings.deploy_root(args.site, getattr(args, "root", None))
        account.require_reachable(
            [root], acct, name,
            hint="deploy where it can (a root whose parents others may enter)")
        if (name in WRITES_RELEASES and root.exists()) or \
                (name in MAKES_ROOT and not root.exists()):
            try:
                account.own_directory(root, acct)
            except OSError as e:
                raise IostackError(f"deployment root {root} is not writable: {e.strerror}: "
                                   f"{e.filename}") from None
    become(account.as_account(acct, [paths.REPO / "bin" / "iostack", *argv]),
           account.environment(acct, state, settings.cache), env_remove=account.ROOTS_OWN)


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line. Everything after `test` is pytest's, options first included:
    argparse's REMAINDER takes no leading option in a subcommand (`test -n 0` would be
    refused as an unknown `-n`), so those are split off before it parses."""
    if argv[:1] == ["test"] and argv[1:2] not in (["-h"], ["--help"]):
        args = parser().parse_args(["test"])
        rest = argv[1:]
        args.pytest_args = rest[1:] if rest[:1] == ["--"] else rest
        return args
    return parser().parse_args(argv)


def main(argv=None, environ=None, program: bool = False):
    """bin/iostack. `program`: this process is bin/iostack itself (python -m iostack), which
    root may replace with the same command run as the service account; a caller that
    imports the CLI (the unit tier) runs every command in its own process."""
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse(argv)
    configure_output()
    try:
        paths.require_repo()
        settings = Settings.from_environ(os.environ if environ is None else environ)
        # before anything runs as root (a no-op otherwise): --help has exited already
        trust.require(paths.REPO, settings.executed_trees)
        if program and os.geteuid() == 0 and command_name(args) in AS_ACCOUNT:
            as_service_account(settings, args, argv)
        return args.func(settings, args)
    except KeyboardInterrupt:
        return 130
    except IostackError as e:
        # the one place a failure becomes a line and an exit status
        print(f"iostack: error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        # A path the operator gave that cannot be used (read-only, missing, full) is one
        # line naming the path; other exceptions are bugs and keep their traceback.
        if (os.environ if environ is None else environ).get("IOSTACK_TRACEBACK"):
            raise
        where = " -> ".join(str(f) for f in (e.filename, e.filename2) if f is not None)
        print(f"iostack: error: {args.command}: {e.strerror or e}"
              + (f": {where}" if where else "")
              + " (IOSTACK_TRACEBACK=1 shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
