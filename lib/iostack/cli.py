"""bin/iostack: set-up, tests and a site's deployment."""
import argparse
import os
import pathlib
import sys

from iostack.core import paths
from iostack.core.errors import IostackError
from iostack.core.process import run
from iostack.site import facts
from iostack.spack import runner


def cmd_setup(args):
    from iostack.offline import setup

    return setup.main(args)


def cmd_test(args):
    from iostack.offline import setup

    setup.for_tests()  # the tests' system packages and Python tools, as set-up installs them
    python = paths.venv() / "bin" / "python"
    return run([python, "-m", "pytest", *args.pytest_args], cwd=paths.REPO, check=False).returncode


def cmd_sites(args):
    for site in facts.spack_sites():
        print(site)
    return 0


def _require_spack():
    runner.locate()  # SpackMissing says what is missing


def cmd_spack(args):
    from iostack.core import filesystems
    from iostack.deployment import releases

    env = facts.spack_env(facts.check_site(args.site), args.env)
    _require_spack()
    root = paths.deploy_root(args.site, args.root)
    spack_args = args.spack_args[1:] if args.spack_args[:1] == ["--"] else args.spack_args
    release = None
    current = releases.current(root) if root.is_dir() and filesystems.read_only(root) else None
    if current:
        # a deployment mounted read-only from a release's image: that release's environment
        release = releases.find(root, current).path
    return runner.spack(spack_args, root, site=env, release=release, check=False).returncode


def cmd_deploy(args):
    from iostack.deployment import deploy
    from iostack.regression import nightly

    site = facts.check_site(args.site)
    env = facts.spack_env(site, args.env)
    root = paths.deploy_root(site, args.root)
    _require_spack()
    if not args.skip_regression:
        nightly.require_node_packages(args.reframe_args)

    def regression(tree, extras):
        # the same run as the nightly: session extras, results DB, zero-test-case check
        return nightly.run(site, site, tree, extra=[*extras, *args.reframe_args], mode=args.mode)

    return deploy.deploy(env, root, deploy.check_buildcache_arg(args.buildcache),
                         None if args.skip_regression else regression,
                         switch=not args.no_switch)


def cmd_releases(args):
    from iostack.deployment import releases

    site = facts.check_site(args.site)
    root = paths.deploy_root(site, args.root)
    if not releases.listing(root):
        print(f"iostack: no releases in {releases.releases_dir(root)}: "
              f"bin/iostack deploy --site {site} makes one")
        return 0
    print(releases.table(root))
    return 0


def cmd_switch(args):
    from iostack.deployment import releases

    site = facts.check_site(args.site)
    root = paths.deploy_root(site, args.root)
    old, seconds = releases.switch(root, args.release, force=args.force)
    print(f"iostack: current: {old or '(none)'} -> {args.release} ({seconds * 1000:.1f} ms)")
    return 0


def cmd_prune(args):
    from iostack.deployment import releases

    site = facts.check_site(args.site)
    root = paths.deploy_root(site, args.root)
    if not (args.keep_installs or args.dry_run):
        _require_spack()
    gone, kept = releases.prune(root, args.keep, dry_run=args.dry_run,
                                garbage=not args.keep_installs)
    what = "would remove" if args.dry_run else "removed"
    print(f"iostack: {what} {len(gone)} release(s): {', '.join(gone) or 'none'}; "
          f"kept {len(kept)}: {', '.join(kept)}")
    return 0


def cmd_mirror_create(args):
    from iostack.spack import mirrors

    site = facts.check_site(args.site)
    _require_spack()
    root = paths.deploy_root(site, args.root)
    dest = pathlib.Path(args.directory).resolve() if args.directory else root / "mirror"
    mirrors.create_source_mirror(facts.spack_env(site, args.env), root, dest)
    return 0


def cmd_mirror_register(args):
    from iostack.spack import config

    def named(value: str) -> tuple[str, str]:
        name, sep, url = value.partition("=")
        if not (sep and name and url):
            raise IostackError(f"{value!r}: give a mirror as NAME=URL")
        return name, url

    mirrors = [config.Mirror(*named(v), binary=False) for v in args.source]
    mirrors += [config.Mirror(*named(v), binary=True, signed=not args.unsigned)
                for v in args.buildcache]
    path = config.registered_mirrors_file()
    text = config.mirrors_yaml(mirrors, replace=args.only, written_by="`bin/iostack mirror register`")
    if path.is_file() and path.read_text() == text:
        print(f"iostack: {path}: unchanged")
        return 0
    config.write_mirrors(path, mirrors, replace=args.only, written_by="`bin/iostack mirror register`")
    print(f"iostack: {path}: written ({len(mirrors)} mirror(s), every site on this node uses them)")
    return 0


def cmd_buildcache_push(args):
    from iostack.spack import mirrors

    site = facts.check_site(args.site)
    _require_spack()
    root = paths.deploy_root(site, args.root)
    dest = pathlib.Path(args.directory).resolve() if args.directory else root / "buildcache"
    mirrors.push(facts.spack_env(site, args.env), root, dest, pathlib.Path(args.key).resolve() if args.key else None)
    return 0


def cmd_bundle(args):
    from iostack.offline import bundle

    site = facts.check_site(args.site)
    _require_spack()
    root = paths.deploy_root(site, args.root)
    bundle.write(site, root, pathlib.Path(args.output).resolve(),
                 pathlib.Path(args.buildcache).resolve() if args.buildcache else None)
    return 0


def cmd_nightly(args):
    from iostack.deployment import image, releases
    from iostack.regression import nightly, reframe

    site = facts.check_site(args.site)
    # a deployment with releases: the current one (resolved: a switch does not move the run)
    tree = releases.tree_under_test(paths.deploy_root(site, args.root))
    extras = releases.session_extras(tree)
    if args.image and not args.state:
        raise IostackError("--image: a mounted image is read-only; give --state DIR for the "
                           "run's stage, reports and results DB")
    if args.state:
        reframe.use_state_dir(pathlib.Path(args.state).resolve())
    if args.image:
        digest = image.verify_mounted(pathlib.Path(args.image).resolve(), tree)
        extras += ["--session-extras", f"image_sha256={digest}"]
    return nightly.run(site, args.system or site, tree, extra=[*extras, *args.reframe_args],
                       mode=args.mode)


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


def cmd_sbom(args):
    from iostack.deployment import sbom

    site = facts.check_site(args.site)
    _require_spack()
    root = paths.deploy_root(site, args.root)
    release = _release(root, args.release)
    text = sbom.generate(release)
    if args.output:
        pathlib.Path(args.output).write_text(text)
        print(f"iostack: SBOM of release {release.id}: {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_image(args):
    from iostack.deployment import image

    site = facts.check_site(args.site)
    root = paths.deploy_root(site, args.root)
    release = _release(root, args.release)
    out, digest = image.build(release, root, pathlib.Path(args.output).resolve()
                              if args.output else None)
    print(f"iostack: image of release {release.id}: {out}\n  sha256 {digest}\n"
          f"iostack: mount it (no root needed) where the release was built for:\n"
          f"  squashfuse {out} {root}\n  module use {root}/current/modulefiles/Core")
    return 0



def cmd_report(args):
    from iostack.deployment import roots
    from iostack.regression import report

    site = facts.check_site(args.site)
    root = paths.deploy_root(site, args.root)
    roots.require_results(root, site)
    out = pathlib.Path(args.out).resolve() if args.out else None
    return report.main(site, args.system or site, root, out, args.period)


def cmd_record_baseline(args):
    from iostack.deployment import roots
    from iostack.regression import baseline

    site = facts.check_site(args.site)
    root = paths.deploy_root(site, args.root)
    roots.require_results(root, site)
    refs = pathlib.Path(args.references_dir).resolve() if args.references_dir else None
    return baseline.main(site, args.system or site, root, args.check, args.session, refs,
                         args.lower, args.upper, args.sessions)


def cmd_store_report(args):
    from iostack.deployment import layout
    from iostack.regression import results

    site = facts.check_site(args.site)
    root = paths.deploy_root(site, args.root)
    if not (root / "reframe").is_dir():
        raise IostackError(f"no deployment root at {root} (no {root / 'reframe'}): check --root / "
                           "IOSTACK_ROOT")
    for report in args.reports:
        uuid = results.store(args.system or site, root, pathlib.Path(report).resolve())
        print(f"iostack: session {uuid} of {report} stored in {layout.results_db(root)}")
    return 0


def cmd_site_init(args):
    from iostack.offline import siteinit

    return siteinit.main(args.name, dry_run=args.dry_run, record=args.record,
                         records=args.from_records, description=args.description)


def cmd_lock(args):
    from iostack.spack import locks

    _require_spack()
    chosen = args.sites or facts.all_spack_envs()
    for site in chosen:
        facts.check_spack_env(site)
    print(f"iostack: concretizing {', '.join(chosen)} from scratch (side by side)", flush=True)
    failed = 0
    for site, result in locks.fresh_locks(chosen).items():
        if isinstance(result, locks.ConcretizationFailed):
            failed += 1
            print(f"iostack: {site}: concretization failed: {result}", flush=True)
            continue
        lock, seconds = result
        diff = locks.differences(locks.committed_lock(site), lock)
        roots = ", ".join(r["spec"] for r in lock["roots"])
        print(f"iostack: {site}: concretized in {seconds:.0f} s; roots: {roots}", flush=True)
        if not diff:
            print(f"iostack: {site}: spack.lock is fresh", flush=True)
            if args.update:
                locks.write(site, lock)  # same content, canonical (reviewable) layout
        elif args.update:
            locks.write(site, lock)
            print(f"iostack: {site}: spack.lock updated ({len(diff)} changes)")
        else:
            failed += 1
            print(f"iostack: {site}: spack.lock is STALE:\n  " + "\n  ".join(diff))
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

    p = sub.add_parser("test", help="run the repository's test suite (pytest)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER)
    p.set_defaults(func=cmd_test)

    p = sub.add_parser("sites", help="list the sites")
    p.set_defaults(func=cmd_sites)

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
                   help="install from this signed build cache only (trusting the keys it "
                        "ships), building nothing")
    p.add_argument("--mode", default="nightly", help="ReFrame mode of the regression (nightly, weekly)")
    p.add_argument("--no-switch", action="store_true",
                   help="build and validate the release, but leave `current` where it is")
    p.add_argument("reframe_args", nargs="*", help="extra ReFrame options (after --)")
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser("releases", help="a deployment's releases: id, commit, lock, date, "
                                        "regression verdict, which is current")
    site_args(p)
    p.set_defaults(func=cmd_releases)

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
    p.add_argument("--mode", default="nightly", help="ReFrame mode (nightly, weekly)")
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


def main(argv=None):
    args = parser().parse_args(argv)
    try:
        paths.require_repo()
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except IostackError as e:
        # the one place a failure becomes a line and an exit status
        print(f"iostack: error: {e}", file=sys.stderr)
        return e.exit_code
    except OSError as e:
        # A path the operator gave that cannot be used (read-only, missing, full) is one
        # line naming the path; other exceptions are bugs and keep their traceback.
        if os.environ.get("IOSTACK_TRACEBACK"):
            raise
        where = " -> ".join(str(f) for f in (e.filename, e.filename2) if f is not None)
        print(f"iostack: error: {args.command}: {e.strerror or e}"
              + (f": {where}" if where else "")
              + " (IOSTACK_TRACEBACK=1 shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
