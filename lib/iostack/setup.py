"""`iostack setup`: system packages, the pinned Python tools, and the pinned Spack."""
import os
import pathlib
import shutil
import subprocess
import sys

from iostack import paths, pins, spack
from iostack.run import CommandFailed, die, run

APT_LIST = paths.REPO / "apt-packages.txt"


def apt_packages():
    return [line.split("#")[0].strip() for line in APT_LIST.read_text().splitlines()
            if line.split("#")[0].strip()]


def missing_apt_packages(pkgs):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${Architecture} ${db:Status-Status}\n", *pkgs],
                         capture_output=True, text=True).stdout
    native = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    installed = set()
    for name, arch, status in (line.split() for line in out.splitlines()):
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
        die("this set-up knows Debian and Ubuntu (apt); install the packages in "
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
        die(f"{len(missing)} system packages missing (set-up needs root for apt)")
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
        out = subprocess.run([candidate, "-c", "import sys; print(sys.version_info >= (3, 11))"],
                             capture_output=True, text=True).stdout.strip()
        if out == "True":
            return candidate
    die("Python 3.11 or newer is needed (ansible-core 2.19); on Ubuntu 22.04: "
        "apt-get install python3.11 python3.11-venv")


def python_tools():
    venv = paths.venv()
    python = venv / "bin" / "python"
    if not python.exists():
        base = system_python()
        # system site-packages: the libvirt and apt bindings come from apt
        # (python3-libvirt, python3-apt), built for the distribution's python3
        run([base, "-m", "venv", "--system-site-packages", venv])
    run([python, "-m", "pip", "install", "-q", "--upgrade", "pip"])
    run([python, "-m", "pip", "install", "-q", "-r", paths.REPO / "requirements.txt"])
    go = shutil.which("go")
    if go:
        try:
            run([go, "install", pins.ACTIONLINT_MODULE], env_extra={"GOBIN": venv / "bin"})
        except CommandFailed as e:
            print(f"iostack: note: actionlint not installed ({e}); its lint test will skip")
    else:
        print("iostack: note: no Go toolchain, so no actionlint; its lint test will skip")


def _clone(url, tag, commit, dest: pathlib.Path):
    if (dest / ".git").exists():
        head = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"],
                              capture_output=True, text=True).stdout.strip()
        if head == commit:
            print(f"iostack: {dest} is at {tag} ({commit[:12]})")
            return
        die(f"{dest} is at {head[:12]}, not at the pinned {tag} ({commit[:12]}); remove it "
            "and run set-up again")
    dest.parent.mkdir(parents=True, exist_ok=True)
    run(["git", "-c", "advice.detachedHead=false", "clone", "-q", "--depth", "1",
         "--branch", tag, url, dest], env_extra={"GIT_TERMINAL_PROMPT": "0"})
    head = subprocess.run(["git", "-C", str(dest), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    if head != commit:
        shutil.rmtree(dest)
        die(f"{url} tag {tag} is {head[:12]}, not the pinned {commit[:12]}")


def spack_checkout():
    if os.environ.get("SPACK_ROOT"):
        print(f"iostack: using SPACK_ROOT={os.environ['SPACK_ROOT']}")
    else:
        cache = paths.cache()
        try:
            _clone(pins.SPACK_URL, pins.SPACK_TAG, pins.SPACK_COMMIT, cache / "spack")
            if not os.environ.get("IOSTACK_SPACK_PACKAGES"):
                _clone(pins.SPACK_PACKAGES_URL, pins.SPACK_PACKAGES_TAG,
                       pins.SPACK_PACKAGES_COMMIT, cache / "spack-packages")
        except CommandFailed:
            print("iostack: note: could not clone Spack (no network?). Spack is optional for "
                  "set-up and tests; `deploy` needs it. " + spack.HOW_TO_PROVIDE)
            return
    try:
        root, pkgs = spack.locate()
        ver = spack.version(root)
    except spack.SpackMissing as e:
        print(f"iostack: note: {e}")
        return
    if ver < pins.SPACK_MIN_VERSION:
        die(f"Spack at {root} is {ver[0]}.{ver[1]}; iostack needs >= "
            f"{'.'.join(map(str, pins.SPACK_MIN_VERSION))}")
    print(f"iostack: Spack {ver[0]}.{ver[1]} at {root}, builtin repo at {pkgs}")


def main(args):
    system_packages(args.skip_apt)
    python_tools()
    spack_checkout()
    print("iostack: set-up done. Test with: bin/iostack test")
    return 0
