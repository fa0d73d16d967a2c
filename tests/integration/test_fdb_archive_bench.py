"""fdb-archive-bench built with CMake against the FDB on this node (Debian's libfdb5-dev),
archiving a sample GRIB2 field of ecCodes: the key path and the message path put the same
fields under the same keys; --verify reads them back byte for byte and fails on one flipped
bit; two writers share the fields; the raw path writes the very bytes FDB's data file holds,
a write() per field and an fdatasync() per flush; FDB's resource file is read from FDB_HOME;
bad arguments get one line. fdb-archive-profile runs the paths against the raw one and counts
their system calls per field."""
import os
import shutil
import subprocess

import pytest

from iostack.core import paths
from iostack.deployment import fdbconfig

pytestmark = pytest.mark.skipif(
    not all(shutil.which(p) for p in ("cmake", "g++", "fdb-list", "grib_set", "codes_info")),
    reason="needs CMake, g++, FDB's tools and ecCodes' tools")

SOURCE = paths.SRC / "fdb-archive-bench"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    build = tmp_path_factory.mktemp("fab-build")
    p = subprocess.run(["cmake", "-S", SOURCE, "-B", build, "-DCMAKE_BUILD_TYPE=Release"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "fdb-archive-bench: FDB 5." in p.stdout
    p = subprocess.run(["cmake", "--build", build, "-j2"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr
    return build / "fdb-archive-bench"


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """ecCodes' N32 pressure-level GRIB2 sample as an ensemble member on level 1."""
    samples = subprocess.run(["codes_info", "-s"], capture_output=True, text=True).stdout.strip()
    out = tmp_path_factory.mktemp("template") / "template.grib"
    subprocess.run(["grib_set", "-s", "productDefinitionTemplateNumber=1,type=pf,stream=enfo,"
                    "number=1,level=1", f"{samples}/reduced_gg_pl_32_grib2.tmpl", out], check=True)
    return out


def run(bench, root, *args, env=None):
    config = root.parent / f"{root.name}.yaml"
    if not config.exists():
        fdbconfig.write(root, config, fdbconfig.find_schema(os.environ))
    p = subprocess.run([str(bench), *map(str, args)], capture_output=True, text=True,
                       env={**os.environ, "FDB5_CONFIG_FILE": str(config), **(env or {})},
                       timeout=300)
    stats = dict(line.split(": ", 1) for line in p.stdout.splitlines() if ": " in line)
    return p, stats


def listing(root):
    config = root.parent / f"{root.name}.yaml"
    p = subprocess.run(["fdb-list", "--porcelain", "class=od,expver=0001"], capture_output=True,
                       text=True, env={**os.environ, "FDB5_CONFIG_FILE": str(config)}, check=True)
    return sorted(line for line in p.stdout.splitlines() if line.startswith("{"))


FIELDS = ["--nsteps", 3, "--nparams", 4, "--members", 2]


def test_key_and_message_paths_archive_the_same_fields_under_the_same_keys(bench, template,
                                                                          tmp_path):
    roots = {}
    for path in ("key", "message"):
        root = tmp_path / path
        p, stats = run(bench, root, "--template", template, "--path", path, *FIELDS)
        assert p.returncode == 0, p.stderr
        assert (stats["Path"], stats["Fields written"], stats["Flushes"]) == (path, "24", "6")
        assert int(stats["Bytes written"]) == 24 * template.stat().st_size
        assert float(stats["Writing duration"]) > 0 and float(stats["Archive CPU seconds"]) > 0
        p, stats = run(bench, root, "--template", template, "--verify", *FIELDS)
        assert p.returncode == 0, p.stderr
        assert (stats["Fields verified"], stats["Verify mismatches"],
                stats["Key mismatches"]) == ("24", "0", "0")
        roots[path] = root
    keys = listing(roots["key"])
    assert len(keys) == 24 and keys == listing(roots["message"])
    assert all("number=2" in k or "number=1" in k for k in keys)


def test_one_flipped_bit_fails_verification(bench, template, tmp_path):
    root = tmp_path / "root"
    assert run(bench, root, "--template", template, *FIELDS)[0].returncode == 0
    (data,) = list(root.rglob("*.data"))
    raw = bytearray(data.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    data.write_bytes(raw)
    p, stats = run(bench, root, "--template", template, "--verify", *FIELDS)
    assert p.returncode == 2 and stats["Verify mismatches"] == "1"
    assert "or they differ" in p.stderr


def test_two_writers_archive_every_field_once_each_under_its_own_keys(bench, template,
                                                                     tmp_path):
    root = tmp_path / "root"
    outs = [run(bench, root, "--template", template, *FIELDS, "--writer", w, "--writers", 2)
            for w in (0, 1)]
    assert [s["Fields written"] for _, s in outs] == ["12", "12"]
    assert [s["Flushes"] for _, s in outs] == ["3", "3"]
    assert len(listing(root)) == 24
    p, stats = run(bench, root, "--template", template, "--verify", *FIELDS)
    assert p.returncode == 0 and stats["Fields verified"] == "24"


@pytest.mark.parametrize("args,problem", [
    ([], "--template, --nsteps and --nparams are required"),
    (["--nsteps", 2, "--nparams", 11, "--template", "t"], "invalid arguments"),
    (["--nsteps", 2, "--nparams", 2, "--template", "t", "--writer", 2, "--writers", 2],
     "--writer must be below --writers"),
    (["--nsteps", 2, "--nparams", 2, "--template", "t", "--path", "grib"],
     "--path is key, message or raw"),
    (["--nsteps", 2, "--nparams", 2, "--template", "t", "--path", "raw"],
     "--raw-file goes with --path raw, and only with it"),
    (["--nsteps", 2, "--nparams", 2, "--template", "t", "--raw-file", "f"],
     "--raw-file goes with --path raw, and only with it"),
    (["--nsteps", 2, "--nparams", 2, "--template", "t", "--path", "raw", "--raw-file", "f",
      "--raw-sync", "always"], "invalid arguments"),
    (["--nsteps", 2, "--nparams", 2, "--template", "no-such.grib"], "no-such.grib: cannot open"),
])
def test_bad_arguments_get_one_line(bench, tmp_path, args, problem):
    p, _ = run(bench, tmp_path / "root", *args)
    assert p.returncode in (1, 3)
    assert p.stderr.splitlines() == [f"fdb-archive-bench: {problem}" + (
        " (--help for usage)" if p.returncode == 1 else "")]
    assert not list((tmp_path / "root").rglob("*.data"))


def test_the_raw_path_writes_the_bytes_of_fdbs_data_file_one_write_per_field(bench, template,
                                                                            tmp_path):
    root = tmp_path / "root"
    p, fdb_stats = run(bench, root, "--template", template, "--nsteps", 3, "--nparams", 4)
    assert p.returncode == 0, p.stderr
    (data,) = list(root.rglob("*.data"))
    raw = tmp_path / "raw-w0.data"
    strace = tmp_path / "raw.strace"
    p = subprocess.run(["strace", "-f", "-qq", "-o", strace, "-e", "trace=write,fdatasync",
                        str(bench), "--template", template, "--nsteps", "3", "--nparams", "4",
                        "--path", "raw", "--raw-file", raw, "--raw-sync", "flush"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    stats = dict(line.split(": ", 1) for line in p.stdout.splitlines() if ": " in line)
    assert raw.read_bytes() == data.read_bytes()
    assert (stats["Path"], stats["Fields written"], stats["Flushes"]) == ("raw", "12", "3")
    assert stats["Bytes written"] == fdb_stats["Bytes written"] == str(raw.stat().st_size)
    # a write() per field, given exactly the fields' bytes, and an fdatasync() per flush
    assert (stats["Write calls"], stats["Bytes to write calls"]) == ("12", stats["Bytes written"])
    calls = [line.split("(")[0].split()[-1] for line in strace.read_text().splitlines()]
    assert calls.count("fdatasync") == 3
    p = subprocess.run([str(bench), "--template", template, "--nsteps", "3", "--nparams", "4",
                        "--path", "raw", "--raw-file", tmp_path / "unsynced.data"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and (tmp_path / "unsynced.data").read_bytes() == data.read_bytes()


def test_fdb_reads_its_resource_file_from_fdb_home(bench, template, tmp_path):
    """A 64-byte fdbBufferSize makes FDB write each field (327 bytes) past its buffer: more
    write calls than fields, where FDB's default 64 MiB buffer writes a flush's fields at once."""
    home = tmp_path / "home"
    (home / "etc" / "config").mkdir(parents=True)
    (home / "etc" / "config" / "local").write_text("fdbBufferSize: 64\n")
    calls = {}
    for name, env in (("default", {"FDB_HOME": str(tmp_path / "no-home")}),
                      ("tiny", {"FDB_HOME": str(home)})):
        p, stats = run(bench, tmp_path / name, "--template", template, "--nsteps", 3,
                       "--nparams", 7, env=env)
        assert p.returncode == 0, p.stderr
        calls[name] = int(stats["Write calls"])
    assert template.stat().st_size > 64
    assert calls["default"] < 21 < calls["tiny"]


def test_the_profile_counts_system_calls_per_field_against_the_raw_path(bench, template,
                                                                       tmp_path):
    profile = SOURCE / "fdb-archive-profile"
    p = subprocess.run([str(profile), "--dir", tmp_path / "prof", "--template", template,
                        "--nsteps", "2", "--nparams", "7", "--repeats", "1", "--strace",
                        f"key=key@{bench}", f"message=message@{bench}"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert sum(line.startswith("rep=1 raw ") for line in lines) == 2
    rows = {line.split()[0]: line.split() for line in lines[lines.index(next(
        x for x in lines if x.startswith("system calls per field"))) + 2:]}
    # one write() per field, one fdatasync() per flush of 7 fields: the raw path's calls
    # exactly; FDB's data sync is one of its fdatasyncs per flush
    assert rows["write"][-1] == "1.00" and rows["fdatasync"][-1] == "0.14"
    assert float(rows["fdatasync"][1]) >= 0.14 and float(rows["fdatasync"][2]) >= 0.14
    assert not (tmp_path / "prof" / "fdb-root").exists()
    p = subprocess.run([str(profile), "--dir", tmp_path / "prof", "--template",
                        tmp_path / "none.grib"], capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr.splitlines() == [f"fdb-archive-profile: error: {tmp_path}/none.grib: no such file"]
