"""Detached OpenPGP signatures with the node's gpg: a bundle's SHA256SUMS signed with the
release key, and verified against keys the admin already holds, never against a key the
signed thing carries unless its fingerprint is one the admin pinned.

Verification runs in a throwaway key ring (GNUPGHOME) holding only the candidate keys, and
reads gpg's machine-readable status lines (`--status-fd`): a signature is accepted only
with GOODSIG and VALIDSIG, and its signer is the primary key fingerprint VALIDSIG names.
Standard library only."""
from __future__ import annotations

import base64
import contextlib
import os
import pathlib
import shutil
import tempfile
from collections.abc import Iterable, Iterator

from iostack.core.errors import IostackError
from iostack.core.process import capture, run


class SignatureRefused(IostackError):
    """A signature that does not verify, or whose signer the admin does not trust."""


def _gpg() -> str:
    gpg = shutil.which("gpg")
    if not gpg:
        raise IostackError("gpg is not installed (Debian: apt-get install gnupg): it checks "
                           "the bundle's signature")
    return gpg


def gpg_args(home: pathlib.Path, *args) -> list:
    return [_gpg(), "--homedir", home, "--batch", "--no-tty", "--no-autostart", *args]


@contextlib.contextmanager
def scratch_ring() -> Iterator[pathlib.Path]:
    """An empty key ring of its own, removed afterwards (its agent, if any, stopped)."""
    # under /tmp: gpg's agent socket path must stay short
    home = pathlib.Path(tempfile.mkdtemp(prefix="iostack-gpg-", dir="/tmp"))
    os.chmod(home, 0o700)
    try:
        yield home
    finally:
        if shutil.which("gpgconf"):
            capture(["gpgconf", "--homedir", home, "--kill", "all"], check=False)
        shutil.rmtree(home, ignore_errors=True)


def normalise(fingerprint: str) -> str:
    return fingerprint.replace(" ", "").upper()


def sign(path: pathlib.Path, fingerprint: str, home: pathlib.Path,
         passphrase_file: pathlib.Path | None = None) -> pathlib.Path:
    """`path`.asc, an armoured detached signature by the key `fingerprint` of ring `home`
    (a passphrase from `passphrase_file`, else from the ring's agent)."""
    out = path.with_name(path.name + ".asc")
    out.unlink(missing_ok=True)
    extra = (["--pinentry-mode", "loopback", "--passphrase-file", passphrase_file]
             if passphrase_file else [])
    args = gpg_args(home, *extra, "--local-user", f"{normalise(fingerprint)}!", "--armor",
                    "--detach-sign", "--output", out, path)
    args.remove("--no-autostart")           # signing needs the agent that holds the secret key
    run(args)
    return out


def export(fingerprint: str, home: pathlib.Path) -> bytes:
    """The armoured public key `fingerprint` of ring `home`."""
    out = capture(gpg_args(home, "--armor", "--export", normalise(fingerprint)), text=False)
    if not out.stdout:
        raise IostackError(f"key {fingerprint} is not in the key ring {home}")
    return out.stdout


def dearmor(data: bytes) -> bytes:
    """OpenPGP packets from an ASCII-armoured key file (its blocks joined), or the bytes as
    they are when they are not armoured: gpgv reads binary key rings only."""
    if not data.lstrip().startswith(b"-----BEGIN PGP"):
        return data
    packets, inside = b"", False
    body: list[str] = []
    for line in data.decode("ascii", "replace").splitlines():
        if line.startswith("-----BEGIN PGP"):
            inside, body, header = True, [], True
        elif line.startswith("-----END PGP"):
            packets += base64.b64decode("".join(body))
            inside = False
        elif inside and header:
            header = bool(line.strip())         # armour headers end at the first blank line
        elif inside and not line.startswith("="):   # "=XXXX" is the CRC
            body.append(line.strip())
    return packets


def _status(path: pathlib.Path, signature: pathlib.Path, keyfile: pathlib.Path) -> dict[str, list[str]]:
    """gpgv's status words for `signature` of `path` with `keyfile` as its only key ring."""
    gpgv = shutil.which("gpgv")
    if not gpgv:
        raise IostackError("gpgv is not installed (Debian: apt-get install gpgv): it checks the "
                           "bundle's signature")
    with tempfile.TemporaryDirectory(prefix="iostack-gpgv-", dir="/tmp") as home:
        ring = pathlib.Path(home) / "ring.gpg"
        ring.write_bytes(dearmor(keyfile.read_bytes()))
        out = capture([gpgv, "--homedir", home, "--status-fd", "1", "--keyring", ring,
                       signature, path], check=False)
    status = [line.split()[1:] for line in out.stdout.splitlines() if line.startswith("[GNUPG:] ")]
    return {s[0]: s[1:] for s in status if s}


def signer(path: pathlib.Path, signature: pathlib.Path, keyrings: Iterable[pathlib.Path],
           carried: Iterable[pathlib.Path], pinned: Iterable[str]) -> tuple[str, pathlib.Path]:
    """(the primary fingerprint of the key that made `signature` of `path`, the key file it
    is in) when that key is trusted: any key of the admin's `keyrings`, or a key the signed
    thing `carried` whose fingerprint is `pinned`. Else SignatureRefused saying why in one
    line. Checked with gpgv, which a minimal Debian has (apt verifies with it)."""
    pinned = {normalise(f) for f in pinned}
    seen: list[dict[str, list[str]]] = []
    for keyfile, trusted in [*((k, None) for k in keyrings), *((k, pinned) for k in carried)]:
        words = _status(path, signature, keyfile)
        seen.append(words)
        if "GOODSIG" in words and "VALIDSIG" in words:
            fingerprint = normalise(words["VALIDSIG"][-1])
            if trusted is None or fingerprint in trusted:
                return fingerprint, keyfile
    raise SignatureRefused(_why_bad(signature, path, seen))


def only_key(keyfile: pathlib.Path, fingerprint: str) -> bytes:
    """The armoured public key `fingerprint` alone, out of a key file that may hold others
    (nothing else in it becomes trusted)."""
    with scratch_ring() as home:
        capture(gpg_args(home, "--import", keyfile), check=False)
        return export(fingerprint, home)


def _why_bad(signature: pathlib.Path, path: pathlib.Path, seen: list[dict[str, list[str]]]) -> str:
    for words in seen:
        if "BADSIG" in words:
            return (f"{signature} does not match {path.name}: it was changed after it was "
                    "signed")
    for words in seen:
        if "VALIDSIG" in words:
            return (f"{signature} is signed by key {normalise(words['VALIDSIG'][-1])}, which "
                    "is not one you trust")
    for words in seen:
        for word, meaning in (("EXPKEYSIG", "an expired key"), ("REVKEYSIG", "a revoked key"),
                              ("EXPSIG", "a signature that has expired")):
            if word in words:
                return f"{signature} is made with {meaning} ({' '.join(words[word][:1])})"
    keys = {(w.get("NO_PUBKEY") or w.get("ERRSIG") or [""])[0] for w in seen} - {""}
    if keys:
        return f"{signature} is signed by key {', '.join(sorted(keys))}, which is not one you trust"
    return f"{signature} is not a valid OpenPGP signature of {path.name}"
