"""A bundle cannot vouch for itself: set-up accepts its SHA256SUMS only when a release key the
admin already holds signed them (a fingerprint in the checkout's pins.json, or a key ring
named with --keyring), or when the bundle holds nothing but what the admin's checkout checks
by content (CI's directory bundle); else it refuses in one line, unless --insecure-unsigned.
Each test below is an attack on that, with the node's real gpg (about 0.1 s a key)."""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from iostack.core import openpgp, paths, pins
from iostack.offline import bundle, setup
from support import forge, targets
from support.fixtures import shared_bundle

pytestmark = pytest.mark.skipif(not shutil.which("gpg"), reason="gpg not installed")


class Keys:
    """Key rings made here: the centre's release key and an attacker's."""

    def __init__(self, top: pathlib.Path):
        self.top = top
        self.fingerprint = {who: self._make(who) for who in ("release", "attacker")}

    def ring(self, who: str) -> pathlib.Path:
        return self.top / who

    def _make(self, who: str) -> str:
        home = self.ring(who)
        home.mkdir(mode=0o700)
        subprocess.run(["gpg", "--homedir", home, "--batch", "--passphrase", "",
                        "--quick-gen-key", f"{who} <{who}@example.org>", "ed25519", "sign", "1y"],
                       check=True, capture_output=True)
        out = subprocess.run(["gpg", "--homedir", home, "--with-colons", "--list-keys"],
                             check=True, capture_output=True, text=True).stdout
        return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr"))

    def public(self, who: str) -> pathlib.Path:
        """The public key as a file the admin holds (exported once, in their hands)."""
        out = self.top / f"{who}.asc"
        out.write_bytes(openpgp.export(self.fingerprint[who], self.ring(who)))
        return out

    def stop(self):
        for who in self.fingerprint:
            subprocess.run(["gpgconf", "--homedir", self.ring(who), "--kill", "all"], check=False)


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    k = Keys(pathlib.Path(tmp_path_factory.mktemp("keys")))
    yield k
    k.stop()


def make_bundle(top: pathlib.Path, payload: bool = True) -> pathlib.Path:
    """A bundle laid out as `bin/iostack bundle` writes one: the real pinned Spack archives
    (linked from CI's bundle), a mirror, and (payload) what only a signature can vouch for: a
    wheel and a build cache file."""
    b = top / "bundle"
    for pin in (pins.SPACK, pins.SPACK_PACKAGES):
        b.mkdir(parents=True, exist_ok=True)
        (b / pin["archive"]).symlink_to(shared_bundle() / pin["archive"])
    (b / "mirror" / "_source-cache" / "archive" / "cb").mkdir(parents=True)
    (b / "mirror" / "_source-cache" / "archive" / "cb" / "ior.tar.gz").write_bytes(b"ior")
    if payload:
        (b / "wheels").mkdir()
        (b / "wheels" / "reframe_hpc-4.10.4-py3-none-any.whl").write_bytes(b"reframe")
        (b / "buildcache").mkdir()
        (b / "buildcache" / "index.json").write_text("{}")
    bundle.write_sums(b)
    return b


def signed(b: pathlib.Path, keys: Keys, who: str = "release") -> pathlib.Path:
    bundle.sign(b, keys.fingerprint[who], keys.ring(who))
    return b


def args(b: pathlib.Path, keyring: list[pathlib.Path] = (), insecure: bool = False):
    return argparse.Namespace(spack_bundle=str(b), keyring=[str(k) for k in keyring],
                              insecure_unsigned=insecure)


def refused(b, **kw) -> str:
    with pytest.raises(setup.SetupRefused) as e:
        setup.bundle_given(targets.settings(), args(b, **kw))
    assert "\n" not in str(e.value)
    return str(e.value)


@pytest.fixture
def pinned_release_key(keys, tmp_path, monkeypatch):
    """The checkout's pins.json names the release key's fingerprint (as a centre commits it)."""
    data = json.loads(pins.PINS_FILE.read_text())
    data["release_keys"] = [keys.fingerprint["release"]]
    copy = tmp_path / "pins.json"
    copy.write_text(json.dumps(data))
    monkeypatch.setattr(pins, "PINS_FILE", copy)
    pins._pins.cache_clear()
    yield
    pins._pins.cache_clear()


# --- what is accepted ----------------------------------------------------------------------

def test_a_bundle_signed_by_the_pinned_release_key_is_accepted(tmp_path, keys, pinned_release_key):
    b = signed(make_bundle(tmp_path), keys)
    source, voucher = setup.bundle_given(targets.settings(), args(b))
    assert source == b and voucher.signer == keys.fingerprint["release"]
    # the key the build cache is then trusted with is the signer's alone
    assert voucher.key() == openpgp.export(voucher.signer, keys.ring("release"))


def test_a_bundle_signed_by_a_key_in_the_keyring_the_admin_names_is_accepted(tmp_path, keys):
    b = signed(make_bundle(tmp_path), keys)
    (b / bundle.SIGNER_KEY).unlink()       # what the bundle carries is not needed
    source, voucher = setup.bundle_given(targets.settings(), args(b, keyring=[keys.public("release")]))
    assert voucher.signer == keys.fingerprint["release"]


def test_cis_unsigned_directory_bundle_is_checked_by_content_instead():
    """../shared/spack: the Spack archives (pins.json's tar_sha256) and a source mirror (the
    recipes' sha256), all checked by the checkout itself: no signature needed."""
    source, voucher = setup.bundle_given(targets.settings(), args(shared_bundle()))
    assert voucher.signer is None and voucher.key() is None
    assert "needs no signature" in voucher.how


# --- the attacks -----------------------------------------------------------------------------

def test_a_tampered_bundle_summed_again_is_refused(tmp_path, keys, pinned_release_key):
    """Whoever can write the bundle swaps a wheel and writes SHA256SUMS again: the sums all
    match, and the release key's signature no longer does."""
    b = signed(make_bundle(tmp_path), keys)
    (b / "wheels" / "reframe_hpc-4.10.4-py3-none-any.whl").write_bytes(b"reframe, backdoored")
    bundle.write_sums(b)
    assert bundle.verify(b)                     # the sums alone would pass it
    assert refused(b).startswith(f"{b / bundle.SIGNATURE} does not match SHA256SUMS: it was "
                                 "changed after it was signed; to trust the release key")


def test_a_bundle_signed_by_an_unknown_key_is_refused(tmp_path, keys, pinned_release_key):
    """... and signs it again with a key of their own, shipping its public half."""
    b = signed(make_bundle(tmp_path), keys)
    (b / "wheels" / "reframe_hpc-4.10.4-py3-none-any.whl").write_bytes(b"reframe, backdoored")
    bundle.write_sums(b)
    signed(b, keys, "attacker")
    assert refused(b).startswith(f"{b / bundle.SIGNATURE} is signed by key "
                                 f"{keys.fingerprint['attacker']}, which is not one you trust")
    # nor does a key ring with the release key make the attacker's key trusted
    assert "which is not one you trust" in refused(b, keyring=[keys.public("release")])


def test_a_bundle_whose_signature_was_removed_is_refused(tmp_path, keys, pinned_release_key):
    b = signed(make_bundle(tmp_path), keys)
    (b / bundle.SIGNATURE).unlink()
    assert refused(b).startswith(
        f"{b} is not signed (no SHA256SUMS.asc) and holds buildcache/index.json and 1 more, "
        "which this checkout cannot check by content")


def test_an_unsigned_bundle_with_a_spack_archive_swapped_and_summed_again_is_refused(tmp_path):
    """An unsigned bundle is only as good as the content checks: a Spack archive with the
    pinned commit in its header and one file changed, summed again."""
    b = make_bundle(tmp_path, payload=False)
    assert setup.bundle_given(targets.settings(), args(b))[1].signer is None
    archive = b / pins.SPACK["archive"]
    archive.unlink()
    _forge_spack_archive(shared_bundle() / pins.SPACK["archive"], archive)
    bundle.write_sums(b)
    assert refused(b).startswith(f"{archive.name} is not the pinned v1.1.0 (2e907202bcc8): its "
                                 "tar stream's sha256 is ")


def test_a_key_slipped_in_beside_the_release_key_is_not_trusted(tmp_path, keys, pinned_release_key):
    """The signature still verifies (the sums are unchanged); the attacker adds their own key
    to the carried key file, hoping the build cache trusts it too."""
    b = signed(make_bundle(tmp_path), keys)
    with open(b / bundle.SIGNER_KEY, "ab") as f:
        f.write(keys.public("attacker").read_bytes())
    _, voucher = setup.bundle_given(targets.settings(), args(b))
    assert voucher.signer == keys.fingerprint["release"]
    assert voucher.key() == openpgp.export(keys.fingerprint["release"], keys.ring("release"))


def test_insecure_unsigned_says_so_and_trusts_no_key(tmp_path, keys, pinned_release_key, capsys):
    b = signed(make_bundle(tmp_path), keys, "attacker")
    source, voucher = setup.bundle_given(targets.settings(), args(b, insecure=True))
    assert voucher.signer is None and voucher.key() is None
    assert f"iostack: WARNING: --insecure-unsigned: nothing vouches for {b}" in capsys.readouterr().err


def test_set_up_from_the_bundles_own_copy_is_refused(tmp_path, keys, pinned_release_key, monkeypatch):
    b = signed(make_bundle(tmp_path), keys)
    monkeypatch.setattr(paths, "REPO", b / "iostack")
    assert refused(b).startswith(f"set-up runs from {b / 'iostack'}, the bundle's own copy of "
                                 "iostack, which cannot vouch for the bundle it came in")


@pytest.mark.root_tmp     # set-up runs as root, from a cache that must be root's
def test_the_command_line_refuses_in_one_line_and_changes_nothing(tmp_path, keys):
    """`bin/iostack setup` with the tampered, re-signed bundle: one line, exit 2, no cache."""
    b = make_bundle(tmp_path)
    signed(b, keys, "attacker")
    cache = tmp_path / "cache"
    p = subprocess.run([str(paths.REPO / "bin" / "iostack"), "setup", "--skip-apt",
                        "--spack-bundle", str(b), "--keyring", str(keys.public("release"))],
                       capture_output=True, text=True,
                       env={**os.environ, "IOSTACK_CACHE": str(cache), "IOSTACK_VENV": sys.prefix})
    assert p.returncode == 2
    assert p.stderr.splitlines() == [
        f"iostack: error: {b / bundle.SIGNATURE} is signed by key {keys.fingerprint['attacker']}, "
        f"which is not one you trust; {bundle.HOW_TO_TRUST}"]
    assert not cache.exists()


def _forge_spack_archive(genuine: pathlib.Path, out: pathlib.Path) -> None:
    """The genuine archive, its pax header (the commit) kept, one file's bytes changed."""
    import gzip

    forge.forge_member(genuine, out, "spack/bin/spack", b"\n# and something else\n")
    assert gzip.open(out).read(10)
