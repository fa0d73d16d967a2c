"""`iostack setup`: system packages, the pinned Python tools, and the pinned Spack.

Every way set-up can fail ends in one line and a non-zero exit, naming the cause an admin
can act on (no root, apt locked or out of disk, a package registry that cannot be reached
or trusted, an OS it does not know, a damaged bundle), and set-up changes nothing before it
has checked what it was given."""
import logging
import os
import pathlib
import re
import shutil

from iostack.core import account, paths, pins
from iostack.core.process import CommandFailed, capture, run
from iostack.core.settings import Settings
from iostack.offline import bundle
from iostack.site.packages import (OS_RELEASE, PURPOSES, SYSTEM_PACKAGES,  # noqa: F401
                                   SetupRefused, apt_packages, debian_release, known_releases,
                                   missing_apt_packages, os_release)
from iostack.site.packages import table as _table  # noqa: F401
from iostack.site.target import SpackEnv, Target
from iostack.spack import runner

log = logging.getLogger(__name__)

#: pip-compile's locks of requirements.in and requirements-tests.in: every package and
#: dependency pinned with its sha256, installed with --require-hashes
REQUIREMENTS = {"deploy": paths.REPO / "requirements.txt",
                "tests": paths.REPO / "requirements-tests.txt"}



# --- multiarch (toolchains/: the aarch64 target's libraries, `name:arm64` lines) --------
def foreign_architectures(pkgs):
    """Architectures of `name:arch` entries, which dpkg must know before apt-get update."""
    return sorted({p.split(":", 1)[1] for p in pkgs if ":" in p})


def _lock_held(m):
    holder = f" ({m['holder']}, pid {m['pid']})" if m["pid"] else ""
    return (f"{m['lock']} is held by another process{holder}: wait for it to finish (apt, "
            "unattended-upgrades), then run set-up again")


def _no_space(m):
    where = f" in {m['where']}" if m["where"] else ""
    return f"no space left on device{where}: free some and run set-up again"


#: causes, in the words of apt, pip and the kernel, and what the admin is told
_CAUSES = [
    (re.compile(r"Could not get lock (?P<lock>\S+?)\.?(?: It is held by process "
                r"(?P<pid>\d+) \((?P<holder>[^)]*)\))?$", re.M), _lock_held),
    # after DPkg::Lock::Timeout, apt names the holder on stdout only
    (re.compile(r"Unable to acquire the dpkg frontend lock \((?P<lock>[^)]+)\)(?P<pid>)(?P<holder>)"),
     _lock_held),
    (re.compile(r"You don't have enough free space in (?P<where>\S+?)\.?$|"
                r"No space left on device(?P<none>)", re.M),
     lambda m: _no_space({"where": m["where"]})),
    # pip in --require-hashes mode, on a file whose sha256 is not the lock's
    (re.compile(r"DO NOT MATCH THE HASHES.*?\n\s+(?P<pkg>\S+) from", re.S),
     lambda m: f"{m['pkg']} is not what the lock pins (its sha256 differs): the index, the "
               "mirror or the bundle's wheels served another file; someone may have tampered "
               "with it"),
    (re.compile(r"CERTIFICATE_VERIFY_FAILED|certificate verify failed|"
                r"Certificate verification failed"),
     lambda m: "the package registry's TLS certificate is not trusted: install the site's CA "
               "(/usr/local/share/ca-certificates/, update-ca-certificates; pip reads "
               "/etc/pip.conf `cert`), or set up from an offline bundle (--spack-bundle DIR)"),
    (re.compile(r"Temporary failure (?:in name )?resolving|Temporary failure in name resolution|"
                r"Network is unreachable|NewConnectionError|Could not resolve|"
                r"Failed to establish a new connection|Connection refused|"
                r"No matching distribution found|Unable to locate package"),
     lambda m: "the package registry cannot be reached (no network?): set up where it can be, "
               "or from an offline bundle made by `bin/iostack bundle` (--spack-bundle DIR)"),
]


def explain(step: str, stderr: str) -> str:
    """One line for a failed step: the cause when the tool's words name one, else its last
    error line."""
    for pattern, meaning in _CAUSES:
        m = pattern.search(stderr)
        if m:
            return f"{step} failed: {meaning(m)}"
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("E:", "ERROR:", "error:", "Error:"))]
    last = (errors or lines or ["no error message"])[-1]
    return f"{step} failed: {last}"


def checked(step: str, cmd, **kwargs):
    """run(), with a failure turned into SetupRefused naming its cause."""
    try:
        return run(cmd, capture_stderr=True, **kwargs)
    except CommandFailed as e:
        raise SetupRefused(explain(step, e.stderr or "")) from None


def system_packages(skip_apt: bool, purposes=("deploy",), os_release_file: pathlib.Path = OS_RELEASE,
                    lock_timeout: int = 120):
    if skip_apt and not shutil.which("dpkg-query"):
        log.info("--skip-apt: the system packages are not checked")
        return
    if not shutil.which("dpkg-query"):
        raise SetupRefused(
            f"this set-up knows Debian (apt); install the equivalents of {SYSTEM_PACKAGES.name} "
            "with this system's tools, then run set-up with --skip-apt")
    try:
        release = debian_release(os_release(os_release_file))
    except SetupRefused:
        if skip_apt:
            log.info("--skip-apt on an OS set-up does not know: the system packages are "
                  "not checked")
            return
        raise
    pkgs = apt_packages(release, purposes)
    missing = missing_apt_packages(pkgs)
    if not missing:
        log.info(f"all {len(pkgs)} system packages ({', '.join(purposes)}) are installed")
        return
    apt_line = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    add_arch = [["dpkg", "--add-architecture", a] for a in foreign_architectures(missing)]
    if skip_apt or os.geteuid() != 0:
        first = "".join(f"{' '.join(c)} && " for c in add_arch)
        log.warning("these system packages are missing; as root, run:\n"
              f"  {first}apt-get update && {' '.join(apt_line)}")
        raise SetupRefused(f"{len(missing)} system packages missing (set-up needs root for apt)")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    # apt waits this long for another apt or unattended-upgrades before giving up
    wait = ["-o", f"DPkg::Lock::Timeout={lock_timeout}"]
    for cmd in add_arch:
        checked("dpkg --add-architecture", cmd)
    # --error-on=any: a source that failed to download fails the update (apt-get update
    # exits 0 on it by default, and the install then cannot find the packages)
    checked("apt-get update", ["apt-get", *wait, "update", "-q", "--error-on=any"], env_extra=env)
    checked("apt-get install", [apt_line[0], *wait, *apt_line[1:]], env_extra=env)


def system_python():
    """The distribution's python3 (not a pyenv or conda one), which must be 3.11 or newer."""
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if not candidate or not os.path.exists(candidate):
            continue
        out = capture([candidate, "-c", "import sys; print(sys.version_info >= (3, 11))"]).stdout.strip()
        if out == "True":
            return candidate
    raise SetupRefused("Python 3.11 or newer is needed (ansible-core 2.19), as /usr/bin/python3")


def python_tools(settings: Settings, purposes=("deploy",), wheels: pathlib.Path | None = None):
    """The venv with the requirements of `purposes`; from a bundle's wheelhouse when given
    (no index)."""
    venv = settings.venv
    python = venv / "bin" / "python"
    if not python.exists():
        base = system_python()
        # system site-packages: the libvirt and apt bindings come from apt
        # (python3-libvirt, python3-apt), built for the distribution's python3
        try:
            checked("creating the venv", [base, "-m", "venv", "--system-site-packages", venv])
        except SetupRefused:
            shutil.rmtree(venv, ignore_errors=True)  # a half-made venv would be taken as made
            raise
    lock = REQUIREMENTS["tests" if "tests" in purposes else "deploy"]
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    # every file checked against the lock's sha256, from an index or the bundle alike
    locked = ["--require-hashes", "--no-deps", "-r", lock]
    if wheels:
        checked("pip install (from the bundle's wheels)",
                [*pip, "--no-index", "--find-links", wheels, *locked])
    else:
        checked(f"pip install -r {lock.name}", [*pip, *locked])
    # iostack and iostack_rfm (pyproject.toml), as this checkout: editable, built with the
    # setuptools just installed, their dependencies pinned above
    checked("pip install -e . (iostack itself)",
            [*pip, "--no-deps", "--no-build-isolation", "-e", paths.REPO])
    if "tests" in purposes or "nightly" in purposes:
        # the test beds (tools/testbed): the tests' and the nightly workflow's throwaway Slurm
        checked("pip install -e tools/testbed (the test beds)",
                [*pip, "--no-deps", "--no-build-isolation", "-e", paths.REPO / "tools" / "testbed"])
    go = shutil.which("go")
    if "tests" not in purposes or (venv / "bin" / "actionlint").exists():
        return
    if go:
        try:
            run([go, "install", pins.ACTIONLINT_MODULE], env_extra={"GOBIN": venv / "bin"})
        except CommandFailed as e:
            log.info(f"note: actionlint not installed ({e}); its lint test will skip")
    else:
        log.info("note: no Go toolchain, so no actionlint; its lint test will skip")


def _clone(pin: dict, dest: pathlib.Path):
    if dest.exists():
        commit = bundle.installed_commit(dest)
        if commit is not None and commit == pin["commit"]:
            log.info(f"{dest} is at {pin['tag']} ({commit[:12]})")
            return
        raise SetupRefused(f"{dest} is at {(commit or 'an unknown commit')[:12]}, not at the "
                           f"pinned {pin['tag']} ({pin['commit'][:12]}); remove it and run "
                           "set-up again")
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        checked(f"cloning {pin['url']}",
                ["git", "-c", "advice.detachedHead=false", "clone", "-q", "--depth", "1",
                 "--branch", pin["tag"], pin["url"], partial],
                env_extra={"GIT_TERMINAL_PROMPT": "0"})
    except SetupRefused as e:
        shutil.rmtree(partial, ignore_errors=True)
        raise SetupRefused(f"{e}; without network, set up from an offline bundle "
                           "(--spack-bundle DIR)") from None
    head = bundle.installed_commit(partial)
    if head != pin["commit"]:
        shutil.rmtree(partial)
        raise SetupRefused(f"{pin['url']} tag {pin['tag']} is {(head or 'unknown')[:12]}, not "
                           f"the pinned {pin['commit'][:12]}")
    partial.rename(dest)


def spack_from_bundle(settings: Settings, source: pathlib.Path, voucher: bundle.Voucher,
                      acct: account.Account | None = None):
    """Unpack a verified bundle's Spack and spack-packages, register its mirrors, and trust
    the release key that signed it for its build cache (no key the bundle merely carries):
    in the key ring of whoever deploys from that cache, the service account's when root
    sets up."""
    cache = settings.cache
    try:
        bundle.unpack(source / pins.SPACK["archive"], cache / "spack", pins.SPACK)
        bundle.unpack(source / pins.SPACK_PACKAGES["archive"], cache / "spack-packages",
                      pins.SPACK_PACKAGES)
        bundle.keep_archives(source, cache)
        bundle.register(source, cache)
    except bundle.BundleError as e:
        raise SetupRefused(str(e)) from None
    if (source / "buildcache").is_dir():
        key = voucher.key()
        if key is None:
            log.info("note: no key of the bundle's build cache is trusted (nothing vouches "
                  "for it); trust one you know with `bin/iostack spack -- gpg trust KEY.pub`")
        else:
            try:
                if acct is None:
                    runner.trust_key(settings, key)
                else:
                    state = account.own_directory(settings.account_state(acct.name), acct,
                                                  mode=0o700)
                    runner.trust_key(settings.replace(state=state), key, acct)
            except CommandFailed as e:
                raise SetupRefused(f"could not trust the release key {voucher.signer}: {e}") from None
            log.info(f"the build cache is trusted as far as release key {voucher.signer} "
                  "signed it")
    complete_source_mirror(settings, cache / "mirrors" / "source")


def complete_source_mirror(settings: Settings, mirror: pathlib.Path, site: str = "local"):
    """A bundle's mirror may lack sources that a recipe takes from a package registry
    (metkit's configuration files come from PyPI): add what the default site's lock needs,
    while the registries set-up uses are reachable. Sources already there are kept."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="iostack-setup-") as tmp:
        proc = runner.spack(["mirror", "create", "--directory", mirror, "--all"],
                            Target(settings, SpackEnv(site), pathlib.Path(tmp)), check=False,
                            capture_stderr=True)
    if proc.returncode != 0:
        log.info(f"note: the offline mirror lacks sources of site {site} that could not "
              f"be fetched here ({runner.error_line(proc.stderr)}); `deploy --site {site}` "
              "will need them")


def spack_checkout(settings: Settings, source_bundle: pathlib.Path | None,
                   voucher: bundle.Voucher | None = None, acct: account.Account | None = None):
    if source_bundle:
        assert voucher is not None, "a bundle is used only once something vouches for it"
        spack_from_bundle(settings, source_bundle, voucher, acct)
    elif settings.spack_root:
        log.info(f"using SPACK_ROOT={settings.spack_root}")
    else:
        _clone(pins.SPACK, settings.cache / "spack")
        if not settings.spack_packages:
            _clone(pins.SPACK_PACKAGES, settings.cache / "spack-packages")
    try:
        root, pkgs = runner.locate(settings)
        ver = runner.version(settings, root)
    except runner.SpackMissing as e:
        raise SetupRefused(str(e)) from None
    if ver < pins.SPACK_MIN_VERSION:
        raise SetupRefused(f"Spack at {root} is {ver[0]}.{ver[1]}; iostack needs >= "
                           f"{'.'.join(map(str, pins.SPACK_MIN_VERSION))}")
    log.info(f"Spack {ver[0]}.{ver[1]} at {root}, builtin repo at {pkgs}")


def bundle_given(settings: Settings, args) -> tuple[pathlib.Path, bundle.Voucher] | tuple[None, None]:
    """The offline bundle named by --spack-bundle or IOSTACK_SPACK_BUNDLE, verified (every
    sum, and who vouches for them: see bundle.vouch) by this checkout's code, never the
    bundle's own copy: a bundle that is damaged, or that nobody the admin trusts vouches for,
    is refused before anything on the node changes."""
    given = getattr(args, "spack_bundle", None) or settings.spack_bundle
    if not given:
        return None, None
    source = pathlib.Path(given).resolve()
    if not source.is_dir():
        raise SetupRefused(f"offline bundle {source} is not a directory")
    if source == paths.REPO or source in paths.REPO.parents:
        raise SetupRefused(f"set-up runs from {paths.REPO}, the bundle's own copy of iostack, "
                           "which cannot vouch for the bundle it came in: run set-up from a "
                           "checkout you already trust (README: Air-gapped nodes)")
    keyrings = [pathlib.Path(k).resolve() for k in getattr(args, "keyring", None) or []]
    for ring in keyrings:
        if not ring.is_file():
            raise SetupRefused(f"--keyring {ring}: no such file")
    try:
        bundle.verify(source)
        voucher = bundle.vouch(source, keyrings, getattr(args, "insecure_unsigned", False))
    except bundle.BundleError as e:
        raise SetupRefused(str(e)) from None
    log.info(f"{source}: every file matches its {bundle.SUMS}; {voucher.how}")
    return source, voucher


def service_account(settings: Settings) -> account.Account | None:
    """As root: the service account root builds, tests and runs the regression as
    (iostack.core.account), made if missing, as the Ansible role `service_account` makes
    it: a system account with its own group, home and no login shell. Not root: none (the
    user builds as themselves)."""
    if os.geteuid() != 0:
        return None
    found = account.lookup(settings.user)
    if found is None:
        useradd = shutil.which("useradd")
        if not useradd:
            raise SetupRefused(f"useradd (Debian's passwd) is missing: set-up creates the "
                               f"service account {settings.user!r} that builds and tests "
                               "instead of root")
        checked(f"creating the service account {settings.user}",
                [useradd, "--system", "--user-group", "--create-home",
                 "--home-dir", account.HOME if settings.user == account.DEFAULT
                 else pathlib.Path("/var/lib") / settings.user,
                 "--shell", "/usr/sbin/nologin",
                 "--comment", "iostack Spack builds, their tests and the regression",
                 settings.user])
        found = account.lookup(settings.user)
        assert found is not None
        log.info(f"created the service account {found.name} (uid {found.uid}, home "
                 f"{found.home}): Spack builds, their tests and the regression run as it")
    else:
        log.info(f"the service account {found.name} (uid {found.uid}) builds, tests and "
                 "runs the regression")
    return found


def published_samples(settings: Settings) -> None:
    """The published GRIB the nightly's checks read (iostack.regression.samples), fetched
    now, while set-up reaches PyPI: the service account that runs the checks only reads the
    cache. A bundle's samples are there already; without either, the checks that need them
    skip, saying so."""
    from iostack.regression import samples

    for name in samples.SOURCES:
        try:
            samples.fetch(name, settings.samples, settings.python)
        except samples.SampleError as e:
            log.info(f"note: {e}; the checks on published GRIB will skip")
            return
    log.info(f"published GRIB samples in {settings.samples}")


def main(settings: Settings, args):
    purposes = ("deploy", *args.with_)
    source_bundle, voucher = bundle_given(settings, args)
    if os.geteuid() == 0:
        # what set-up makes, the service account reads, whatever root's umask
        os.umask(0o022)
    system_packages(args.skip_apt, purposes, lock_timeout=settings.apt_lock_timeout)
    acct = service_account(settings)
    wheels = source_bundle / "wheels" if source_bundle and (source_bundle / "wheels").is_dir() else None
    python_tools(settings, purposes, wheels)
    spack_checkout(settings, source_bundle, voucher, acct)
    published_samples(settings)
    log.info("set-up done. Test with: bin/iostack test")
    return 0


def for_tests(settings: Settings, skip_apt: bool = False):
    """What `bin/iostack test` needs beyond set-up: every purpose's system packages and the
    test suite's Python tools."""
    system_packages(skip_apt, PURPOSES, lock_timeout=settings.apt_lock_timeout)
    python_tools(settings, PURPOSES)
