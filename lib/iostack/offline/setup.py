"""`iostack setup`: system packages, the pinned Python tools, and the pinned Spack."""
import os
import pathlib
import shutil
import sys

from iostack.core import paths, pins
from iostack.core.errors import IostackError
from iostack.core.process import CommandFailed, capture, run
from iostack.offline import bundle
from iostack.spack import runner

APT_LIST = paths.REPO / "apt-packages.txt"


def apt_packages():
    return [line.split("#")[0].strip() for line in APT_LIST.read_text().splitlines()
            if line.split("#")[0].strip()]


def missing_apt_packages(pkgs):
    """`pkgs` that dpkg does not list as installed. dpkg-query -W prints one line per package
    it knows, installed or not; the architecture of a never-installed one is empty, so the
    fields are tab-separated, not split on whitespace."""
    out = capture(["dpkg-query", "-W", "-f=${Package}\t${Architecture}\t${db:Status-Status}\n",
                   *pkgs]).stdout
    native = capture(["dpkg", "--print-architecture"]).stdout.strip()
    installed = set()
    for line in out.splitlines():
        name, arch, status = (line.split("\t") + ["", ""])[:3]
        if status == "installed":
            installed.add(f"{name}:{arch}")
            if arch in (native, "all"):
                installed.add(name)
    return [p for p in pkgs if p not in installed]


# --- multiarch (toolchains/: the aarch64 target's libraries, `name:arm64` lines) --------
def foreign_architectures(pkgs):
    """Architectures of `name:arch` entries, which dpkg must know before apt-get update."""
    return sorted({p.split(":", 1)[1] for p in pkgs if ":" in p})


def system_packages(skip_apt: bool):
    if not shutil.which("dpkg-query"):
        raise IostackError("this set-up knows Debian and Ubuntu (apt); install the packages in "
                           f"{APT_LIST.name} with your distribution's tools, then run with --skip-apt")
    pkgs = apt_packages()
    missing = missing_apt_packages(pkgs)
    if not missing:
        print(f"iostack: all {len(pkgs)} system packages are installed")
        return
    apt_line = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    add_arch = [["dpkg", "--add-architecture", a] for a in foreign_architectures(missing)]
    if skip_apt or os.geteuid() != 0:
        first = "".join(f"{' '.join(c)} && " for c in add_arch)
        print("iostack: these system packages are missing; as root, run:\n"
              f"  {first}apt-get update && {' '.join(apt_line)}", file=sys.stderr)
        raise IostackError(f"{len(missing)} system packages missing (set-up needs root for apt)")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    for cmd in add_arch:
        run(cmd)
    run(["apt-get", "update", "-q"], env_extra=env)
    run(apt_line, env_extra=env)


def system_python():
    """The distribution's python3 (not a pyenv or conda one), which must be 3.11 or newer."""
    for candidate in ("/usr/bin/python3", "/usr/bin/python3.11", shutil.which("python3.11")):
        if not candidate or not os.path.exists(candidate):
            continue
        out = capture([candidate, "-c", "import sys; print(sys.version_info >= (3, 11))"]).stdout.strip()
        if out == "True":
            return candidate
    raise IostackError("Python 3.11 or newer is needed (ansible-core 2.19); on Ubuntu 22.04: "
                       "apt-get install python3.11 python3.11-venv")


def python_tools(wheels: pathlib.Path | None = None):
    """The venv with requirements.txt; from a bundle's wheelhouse when given (no index)."""
    venv = paths.venv()
    python = venv / "bin" / "python"
    if not python.exists():
        base = system_python()
        # system site-packages: the libvirt and apt bindings come from apt
        # (python3-libvirt, python3-apt), built for the distribution's python3
        run([base, "-m", "venv", "--system-site-packages", venv])
    if wheels:
        run([python, "-m", "pip", "install", "-q", "--no-index", "--find-links", wheels,
             "-r", paths.REPO / "requirements.txt"])
    else:
        run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
        run([python, "-m", "pip", "install", "-q", "-r", paths.REPO / "requirements.txt"])
    # iostack and iostack_rfm (pyproject.toml) and the tests' test beds (tools/testbed), as
    # this checkout: editable, built with the setuptools just installed, dependencies there
    run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "-e", paths.REPO, "-e", paths.REPO / "tools" / "testbed"])
    go = shutil.which("go")
    if go:
        try:
            run([go, "install", pins.ACTIONLINT_MODULE], env_extra={"GOBIN": venv / "bin"})
        except CommandFailed as e:
            print(f"iostack: note: actionlint not installed ({e}); its lint test will skip")
    else:
        print("iostack: note: no Go toolchain, so no actionlint; its lint test will skip")


def _clone(pin: dict, dest: pathlib.Path):
    if dest.exists():
        commit = bundle.installed_commit(dest)
        if commit is not None and commit == pin["commit"]:
            print(f"iostack: {dest} is at {pin['tag']} ({commit[:12]})")
            return
        raise IostackError(f"{dest} is at {(commit or 'an unknown commit')[:12]}, not at the "
                           f"pinned {pin['tag']} ({pin['commit'][:12]}); remove it and run set-up "
                           "again")
    dest.parent.mkdir(parents=True, exist_ok=True)
    run(["git", "-c", "advice.detachedHead=false", "clone", "-q", "--depth", "1",
         "--branch", pin["tag"], pin["url"], dest], env_extra={"GIT_TERMINAL_PROMPT": "0"})
    head = bundle.installed_commit(dest)
    if head != pin["commit"]:
        shutil.rmtree(dest)
        raise IostackError(f"{pin['url']} tag {pin['tag']} is {(head or 'unknown')[:12]}, not the "
                           f"pinned {pin['commit'][:12]}")


def spack_from_bundle(source: pathlib.Path):
    """Verify an offline bundle, unpack its Spack and spack-packages, register its mirrors."""
    cache = paths.cache()
    bundle.unpack(source / pins.SPACK["archive"], cache / "spack", pins.SPACK)
    bundle.unpack(source / pins.SPACK_PACKAGES["archive"], cache / "spack-packages",
                  pins.SPACK_PACKAGES)
    bundle.keep_archives(source, cache)
    bundle.register(source, cache)
    if (source / "buildcache").is_dir():
        try:
            runner.trust_buildcache_keys(cache / "mirrors" / "buildcache")
        except CommandFailed as e:
            raise IostackError(f"could not trust the bundle's build cache keys: {e}") from e
    complete_source_mirror(cache / "mirrors" / "source")


def complete_source_mirror(mirror: pathlib.Path, site: str = "local"):
    """A bundle's mirror may lack sources that a recipe takes from a package registry
    (metkit's configuration files come from PyPI): add what the default site's lock needs,
    while the registries set-up uses are reachable. Sources already there are kept."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="iostack-setup-") as tmp:
        proc = runner.spack(["mirror", "create", "--directory", mirror, "--all"],
                           pathlib.Path(tmp), site=site, check=False, capture_stderr=True)
    if proc.returncode != 0:
        print(f"iostack: note: the offline mirror lacks sources of site {site} that could not "
              f"be fetched here ({runner.error_line(proc.stderr)}); `deploy --site {site}` "
              "will need them")

def spack_checkout(source_bundle: pathlib.Path | None):
    if source_bundle:
        spack_from_bundle(source_bundle)
    elif os.environ.get("SPACK_ROOT"):
        print(f"iostack: using SPACK_ROOT={os.environ['SPACK_ROOT']}")
    else:
        cache = paths.cache()
        try:
            _clone(pins.SPACK, cache / "spack")
            if not os.environ.get("IOSTACK_SPACK_PACKAGES"):
                _clone(pins.SPACK_PACKAGES, cache / "spack-packages")
        except CommandFailed:
            print("iostack: note: could not clone Spack (no network?). Spack is optional for "
                  "set-up and tests; `deploy` needs it. " + runner.how_to_provide())
            return
    try:
        root, pkgs = runner.locate()
        ver = runner.version(root)
    except runner.SpackMissing as e:
        print(f"iostack: note: {e}")
        return
    if ver < pins.SPACK_MIN_VERSION:
        raise IostackError(f"Spack at {root} is {ver[0]}.{ver[1]}; iostack needs >= "
                           f"{'.'.join(map(str, pins.SPACK_MIN_VERSION))}")
    print(f"iostack: Spack {ver[0]}.{ver[1]} at {root}, builtin repo at {pkgs}")


def main(args):
    given = args.spack_bundle or os.environ.get("IOSTACK_SPACK_BUNDLE")
    source_bundle = pathlib.Path(given).resolve() if given else None
    if source_bundle:
        if not source_bundle.is_dir():
            raise IostackError(f"offline bundle {source_bundle} is not a directory")
        bundle.verify(source_bundle)  # a damaged bundle is refused before anything changes
        print(f"iostack: {source_bundle}: every file matches its {bundle.SUMS}")
    system_packages(args.skip_apt)
    wheels = source_bundle / "wheels" if source_bundle and (source_bundle / "wheels").is_dir() else None
    python_tools(wheels)
    spack_checkout(source_bundle)
    print("iostack: set-up done. Test with: bin/iostack test")
    return 0
