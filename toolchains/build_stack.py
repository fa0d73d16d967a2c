#!/usr/bin/env python3
"""Build ecbuild, eckit, metkit and FDB from the Spack source mirror with plain CMake,
natively or with one of this directory's toolchain files, and time each step.

    build_stack.py --work DIR --prefix DIR [--toolchain FILE --preseed FILE]
                   [--packages ecbuild,eckit,metkit,fdb] [-- CMAKE ARGS]

Each source archive is the one whose sha256 the Spack recipe pins (iostack's recipes for
eckit, metkit and FDB, builtin's for ecbuild), taken from the mirror's `_source-cache`
(IOSTACK_SOURCE_MIRROR, else the one set-up registered, ~/.cache/iostack/mirrors/source)
and checked
before it is unpacked. Every package gets the same options natively and cross (FEATURES):
what the stack needs to archive and retrieve GRIB, nothing that needs a library the
target does not have. Prints one `build_stack: <package> <step> seconds=<s>` line per step
and exits non-zero with one line naming the problem when a step fails.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tarfile
import time
import zipfile

# iostack: the venv's, or the job's PYTHONPATH (iostack.core.paths.job_pythonpath)
from iostack.core import archives, paths
from iostack.core.settings import Settings

PACKAGES = ("ecbuild", "eckit", "metkit", "fdb")
VERSIONS = {"ecbuild": "3.7.2", "eckit": "1.28.8", "metkit": "1.11.22", "fdb": "5.13.106"}

# Options per package, the same for every build; features left at their default find
# nothing optional on either side (checked by the tests, which compare installed features).
FEATURES = {
    "ecbuild": ["-DENABLE_TESTS=OFF"],
    "eckit": ["-DENABLE_TESTS=OFF", "-DENABLE_BUILD_TOOLS=OFF", "-DENABLE_MPI=OFF",
              "-DENABLE_ECKIT_CMD=OFF", "-DENABLE_ECKIT_SQL=OFF", "-DENABLE_EIGEN=OFF",
              "-DENABLE_LAPACK=OFF", "-DENABLE_CURL=OFF", "-DENABLE_SSL=OFF",
              "-DENABLE_BZIP2=OFF", "-DENABLE_SNAPPY=OFF", "-DENABLE_LZ4=OFF",
              "-DENABLE_AEC=OFF", "-DENABLE_XXHASH=OFF", "-DENABLE_DOCS=OFF"],
    # metkit's archive holds no MARS language files: its configure clones them
    # (github.com/ecmwf/metkit-configs), impossible offline, so that bundle is skipped
    # and install_metkit_share() puts a published copy where metkit looks.
    "metkit": ["-DENABLE_TESTS=OFF", "-DENABLE_BUILD_TOOLS=OFF", "-DENABLE_GRIB=ON",
               "-DENABLE_BUFR=OFF", "-DENABLE_NETCDF=OFF", "-DENABLE_ODB=OFF",
               "-DBUNDLE_SKIP_SHARE=ON"],
    "fdb": ["-DENABLE_TESTS=OFF", "-DENABLE_FDB_BUILD_TOOLS=ON", "-DENABLE_BUILD_TOOLS=ON",
            "-DENABLE_GRIB=ON", "-DENABLE_FDB_REMOTE=OFF", "-DENABLE_LUSTRE=OFF",
            "-DENABLE_RADOSFDB=OFF", "-DENABLE_DAOSFDB=OFF", "-DENABLE_DUMMY_DAOS=OFF",
            "-DENABLE_DAOS_ADMIN=OFF", "-DENABLE_EXPERIMENTAL=OFF"],
}


class BuildError(Exception):
    pass


def mirror() -> pathlib.Path:
    """IOSTACK_SOURCE_MIRROR, else the source mirror `bin/iostack setup --spack-bundle`
    registered on this node."""
    path = pathlib.Path(os.environ.get("IOSTACK_SOURCE_MIRROR") or Settings.from_environ(os.environ).cache / "mirrors" / "source")
    if not (path / "_source-cache").is_dir():
        raise BuildError(f"no Spack source mirror at {path} (set IOSTACK_SOURCE_MIRROR to a "
                         "directory holding _source-cache/)")
    return path


def recipes(package: str) -> list[pathlib.Path]:
    """Our recipe of `package`, then builtin's (ours may subclass it, adding versions)."""
    ours = paths.REPO / "packages" / "spack_repo" / "iostack" / "packages" / package / "package.py"
    settings = Settings.from_environ(os.environ)
    builtin = settings.spack_packages or settings.cache / "spack-packages"
    path = builtin / "repos" / "spack_repo" / "builtin" / "packages" / package / "package.py"
    found = [p for p in (ours, path) if p.is_file()]
    if not found:
        raise BuildError(f"no Spack recipe for {package} (looked in {ours.parent} and {path.parent}; "
                         "set IOSTACK_SPACK_PACKAGES to a spack-packages checkout)")
    return found


def pinned_sha256(package: str, version: str) -> str:
    for path in recipes(package):
        m = re.search(rf'version\(\s*"{re.escape(version)}",\s*sha256="([0-9a-f]{{64}})"',
                      path.read_text())
        if m:
            return m[1]
    raise BuildError(f"no recipe of {package} pins a sha256 for {package}@{version} "
                     f"({', '.join(map(str, recipes(package)))})")


def archive(package: str) -> pathlib.Path:
    """The mirror's archive of the pinned version, after checking its sha256."""
    sha = pinned_sha256(package, VERSIONS[package])
    path = mirror() / "_source-cache" / "archive" / sha[:2] / f"{sha}.tar.gz"
    if not path.is_file():
        raise BuildError(f"{package}@{VERSIONS[package]}: {path} is not in the mirror")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != sha:
        raise BuildError(f"{path}: sha256 is {digest}, the recipe pins {sha}")
    return path


def unpack(package: str, work: pathlib.Path) -> pathlib.Path:
    src = work / "src" / f"{package}-{VERSIONS[package]}"
    if not (src / "CMakeLists.txt").is_file():
        src.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive(package)) as tar:
            archives.extract(tar, src.parent)   # nothing lands or points outside it
    if not (src / "CMakeLists.txt").is_file():
        raise BuildError(f"{package}: the archive did not unpack into {src}")
    return src


def step(package: str, name: str, cmd: list, log: pathlib.Path, env=None) -> float:
    """Run one build step, output to log; print and return its wall time."""
    print(f"+ {shlex.join(map(str, cmd))}", flush=True)
    start = time.monotonic()
    with open(log, "a") as out:
        rc = subprocess.run([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT, env=env).returncode
    seconds = time.monotonic() - start
    print(f"build_stack: {package} {name} seconds={seconds:.1f} rc={rc}", flush=True)
    if rc != 0:
        tail = log.read_text(errors="replace").splitlines()[-15:]
        print("\n".join(tail), file=sys.stderr)
        raise BuildError(f"{package} {name} failed (rc={rc}); log: {log}")
    return seconds


def configure_args(package: str, src: pathlib.Path, build: pathlib.Path, prefix: pathlib.Path,
                   toolchain=None, preseed=None, extra=(), prefix_path=()) -> list:
    """cmake command line of one package (the order matters: -D after -C overrides it)."""
    cmd = ["cmake", "-S", src, "-B", build]
    if toolchain:
        cmd.append(f"-DCMAKE_TOOLCHAIN_FILE={toolchain}")
    if preseed:
        cmd += ["-C", preseed]
    # ecbuild and the packages built before come from the prefix, never from the host.
    search = ";".join(map(str, [prefix, *prefix_path]))
    cmd += [f"-DCMAKE_INSTALL_PREFIX={prefix}", f"-DCMAKE_PREFIX_PATH={search}",
            f"-Decbuild_DIR={prefix}/share/ecbuild/cmake", "-DCMAKE_BUILD_TYPE=Bit"]
    return cmd + FEATURES[package] + list(extra)


def build_package(package: str, work: pathlib.Path, prefix: pathlib.Path, toolchain=None,
                  preseed=None, extra=(), prefix_path=(), jobs: int = 2) -> dict[str, float]:
    src = unpack(package, work)
    build = work / "build" / package
    build.mkdir(parents=True, exist_ok=True)
    log = work / f"{package}.log"
    if package == "ecbuild":  # host-side CMake macros: never cross-compiled
        toolchain = preseed = None
    times = {"configure": step(package, "configure",
                               configure_args(package, src, build, prefix, toolchain, preseed, extra,
                                              prefix_path), log)}
    times["build"] = step(package, "build", ["cmake", "--build", build, "-j", str(jobs)], log)
    times["install"] = step(package, "install", ["cmake", "--install", build], log)
    if package == "metkit":
        install_metkit_share(work, prefix)
    return times


def metkit_share_wheel() -> tuple[str, str]:
    """(URL, sha256) of the metkitlib wheel whose share/metkit metkit's recipe installs (its
    `metkit-configs` resource): the MARS language files metkit 1.11's archive lacks."""
    text = recipes("metkit")[0].read_text()
    m = re.search(r'name="metkit-configs",\s*url="([^"]+)",\s*sha256="([0-9a-f]{64})"', text)
    if not m:
        raise BuildError(f"{recipes('metkit')[0]} has no metkit-configs resource")
    return m[1], m[2]


def install_metkit_share(work: pathlib.Path, prefix: pathlib.Path) -> pathlib.Path:
    """<prefix>/share/metkit from the recipe's pinned metkitlib wheel: the mirror's copy
    (set-up adds it), else downloaded with pip, sha256-checked either way."""
    share = prefix / "share" / "metkit"
    if (share / "language.yaml").is_file():
        return share
    url, sha = metkit_share_wheel()
    wheel = mirror() / "_source-cache" / "archive" / sha[:2] / f"{sha}.whl"
    if not wheel.is_file():
        wheels = work / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        name, version = url.rsplit("/", 1)[1].split("-")[:2]
        (wheels / "requirements.txt").write_text(f"{name}=={version} --hash=sha256:{sha}\n")
        step("metkit", "share", [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                                 "--require-hashes", "--only-binary=:all:", "--python-version",
                                 "3.11", "--platform", "manylinux_2_28_x86_64", "-d", wheels,
                                 "-r", wheels / "requirements.txt"], work / "metkit.log")
        wheel = next(wheels.glob(f"{name}-*.whl"))
    if hashlib.sha256(wheel.read_bytes()).hexdigest() != sha:
        raise BuildError(f"{wheel}: not the metkitlib wheel the metkit recipe pins ({sha})")
    with zipfile.ZipFile(wheel) as z:
        members = [m for m in z.namelist() if m.startswith("metkitlib/share/metkit/") and not m.endswith("/")]
        for member in members:
            target = share / member.removeprefix("metkitlib/share/metkit/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(z.read(member))
    if not (share / "language.yaml").is_file():
        raise BuildError(f"{wheel.name} has no share/metkit/language.yaml")
    return share


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="build_stack", description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True, type=pathlib.Path, help="sources, build trees, logs")
    ap.add_argument("--prefix", required=True, type=pathlib.Path, help="install prefix")
    ap.add_argument("--toolchain", type=pathlib.Path, help="CMake toolchain file (cross build)")
    ap.add_argument("--preseed", type=pathlib.Path, help="pre-seeded configure results (-C)")
    ap.add_argument("--packages", default=",".join(PACKAGES),
                    help=f"comma-separated, in build order (default {','.join(PACKAGES)})")
    ap.add_argument("--prefix-path", action="append", default=[], type=pathlib.Path,
                    help="more prefixes to find dependencies in (e.g. debian-dev-overlay.sh's)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("cmake_args", nargs="*", help="more cmake arguments for every package (after --)")
    args = ap.parse_args(argv)
    packages = [p for p in args.packages.split(",") if p]
    unknown = [p for p in packages if p not in PACKAGES]
    if unknown:
        print(f"build_stack: unknown package(s) {', '.join(unknown)}; known: {', '.join(PACKAGES)}",
              file=sys.stderr)
        return 2
    for f in (args.toolchain, args.preseed):
        if f and not f.is_file():
            print(f"build_stack: {f} does not exist", file=sys.stderr)
            return 2
    work, prefix = args.work.resolve(), args.prefix.resolve()
    work.mkdir(parents=True, exist_ok=True)
    total = 0.0
    try:
        for package in packages:
            times = build_package(package, work, prefix, args.toolchain and args.toolchain.resolve(),
                                  args.preseed and args.preseed.resolve(), args.cmake_args,
                                  [p.resolve() for p in args.prefix_path], args.jobs)
            total += sum(times.values())
    except BuildError as e:
        print(f"build_stack: {e}", file=sys.stderr)
        return 1
    print(f"build_stack: all total seconds={total:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
