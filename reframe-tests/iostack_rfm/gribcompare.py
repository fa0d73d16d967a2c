"""Compare two GRIB files message by message: counts, bytes, checksums and grib_compare.

[OIFS-HECToR] validated FDB output by extracting fields with the GRIB tools and comparing them
with the non-FDB GRIB files: they had to be bit-identical. FDB returns fields in request
order, not in archive order, so messages are matched by their MARS keys, not by position.

    python3 -m iostack_rfm.gribcompare compare REFERENCE CANDIDATE [--expect N]
    python3 -m iostack_rfm.gribcompare flip-bit FILE [--message K]

`compare` exits 0 only when both files hold the same number of messages (and N when
--expect is given), every message of one has a byte-identical twin in the other, and
grib_compare finds no difference. Anything else exits 1 with the reason on the
`gribcompare: RESULT=` line. `flip-bit` corrupts one bit of one message's data section (the
self-test that proves `compare` can fail).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile

# MARS keys that identify a field within one experiment, as grib_get prints them.
MATCH_KEYS = ("levtype", "levelist", "param", "step")


class GribFormatError(ValueError):
    pass


def split_messages(data: bytes) -> list[bytes]:
    """Split a GRIB file's bytes into messages (editions 1 and 2), checking each ends in 7777."""
    messages = []
    pos = 0
    while True:
        start = data.find(b"GRIB", pos)
        if start < 0:
            break
        if len(data) < start + 16:
            raise GribFormatError(f"truncated GRIB header at byte {start}")
        edition = data[start + 7]
        if edition == 2:
            length = int.from_bytes(data[start + 8:start + 16], "big")
        elif edition == 1:
            length = int.from_bytes(data[start + 4:start + 7], "big")
        else:
            raise GribFormatError(f"unknown GRIB edition {edition} at byte {start}")
        end = start + length
        if end > len(data) or data[end - 4:end] != b"7777":
            raise GribFormatError(f"message at byte {start} does not end in 7777")
        messages.append(data[start:end])
        pos = end
    return messages


def data_section_offset(message: bytes) -> tuple[int, int]:
    """(offset, length) of the payload of a GRIB2 message's data section (section 7)."""
    if message[7] != 2:
        raise GribFormatError("only GRIB2 data sections are located")
    pos = 16
    while pos < len(message) - 4:
        length = int.from_bytes(message[pos:pos + 4], "big")
        if length < 5:
            break
        if message[pos + 4] == 7:
            return pos + 5, length - 5
        pos += length
    raise GribFormatError("GRIB2 message has no section 7")


def message_keys(path: str) -> list[tuple[str, ...]]:
    """MARS keys of every message, in file order, read with ecCodes' grib_get."""
    out = subprocess.run(
        ["grib_get", "-p", ",".join(MATCH_KEYS), path],
        check=True, capture_output=True, text=True,
    ).stdout
    return [tuple(line.split()) for line in out.splitlines() if line.strip()]


def _index(path: str) -> tuple[list[bytes], dict[tuple[str, ...], bytes]]:
    with open(path, "rb") as f:
        messages = split_messages(f.read())
    keys = message_keys(path) if messages else []
    if len(keys) != len(messages):
        raise GribFormatError(f"{path}: grib_get saw {len(keys)} messages, split found {len(messages)}")
    index: dict[tuple[str, ...], bytes] = {}
    for key, msg in zip(keys, messages, strict=True):
        if key in index:
            raise GribFormatError(f"{path}: duplicate field {'/'.join(key)}")
        index[key] = msg
    return messages, index


def _grib_compare_sorted(ref: dict, cand: dict, keys: list) -> int:
    """Run grib_compare on both sets written in the same key order; return its exit code."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, index in (("reference", ref), ("candidate", cand)):
            p = os.path.join(tmp, name + ".grib")
            with open(p, "wb") as f:
                for k in keys:
                    f.write(index[k])
            paths.append(p)
        return subprocess.run(["grib_compare", *paths], capture_output=True).returncode


def compare(reference: str, candidate: str, expect: int | None = None, out=sys.stdout) -> bool:
    def say(line):
        print(f"gribcompare: {line}", file=out)

    ref_msgs, ref = _index(reference)
    cand_msgs, cand = _index(candidate)
    say(f"reference={reference} messages={len(ref_msgs)} bytes={sum(map(len, ref_msgs))}")
    say(f"candidate={candidate} messages={len(cand_msgs)} bytes={sum(map(len, cand_msgs))}")
    common = sorted(set(ref) & set(cand))
    missing = sorted(set(ref) - set(cand))
    extra = sorted(set(cand) - set(ref))
    differing = []
    for key in common:
        a = hashlib.sha256(ref[key]).hexdigest()
        b = hashlib.sha256(cand[key]).hexdigest()
        same = a == b
        say(f"field={'/'.join(key)} sha256={a} {'identical' if same else 'DIFFERENT candidate=' + b}")
        if not same:
            differing.append(key)
    say(f"matched={len(common)} missing={len(missing)} extra={len(extra)} "
        f"identical={len(common) - len(differing)} differing={len(differing)}")
    gc_rc = _grib_compare_sorted(ref, cand, common) if common else None
    say(f"grib_compare={'not-run' if gc_rc is None else ('ok' if gc_rc == 0 else 'DIFFERENT')}")

    reasons = []
    if not ref_msgs:
        reasons.append("reference is empty")
    if not cand_msgs:
        reasons.append("candidate is empty (nothing retrieved)")
    if expect is not None and (len(ref_msgs) != expect or len(cand_msgs) != expect):
        reasons.append(f"expected {expect} messages")
    if missing or extra:
        reasons.append(f"{len(missing)} missing, {len(extra)} extra fields")
    if differing:
        reasons.append(f"{len(differing)} fields differ in bytes")
    if gc_rc not in (0, None):
        reasons.append("grib_compare reports differences")
    say("RESULT=IDENTICAL" if not reasons else "RESULT=DIFFERENT reason=" + "; ".join(reasons))
    return not reasons


def flip_bit(path: str, message: int = 0) -> tuple[int, int]:
    """Flip the lowest bit of the middle byte of one message's data section, in place."""
    with open(path, "rb") as f:
        data = bytearray(f.read())
    messages = split_messages(bytes(data))
    if not 0 <= message < len(messages):
        raise GribFormatError(f"{path} has {len(messages)} messages, no message {message}")
    start = sum(len(m) for m in messages[:message])
    offset, length = data_section_offset(messages[message])
    byte = start + offset + length // 2
    data[byte] ^= 0x01
    with open(path, "wb") as f:
        f.write(data)
    return byte, 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="gribcompare", description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare")
    c.add_argument("reference")
    c.add_argument("candidate")
    c.add_argument("--expect", type=int)
    fb = sub.add_parser("flip-bit")
    fb.add_argument("file")
    fb.add_argument("--message", type=int, default=0, help="0-based message index")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "compare":
            return 0 if compare(args.reference, args.candidate, args.expect) else 1
        byte, bit = flip_bit(args.file, args.message)
        print(f"gribcompare: flipped bit {bit} of byte {byte} in message {args.message} of {args.file}")
        return 0
    except (GribFormatError, OSError, subprocess.CalledProcessError) as e:
        print(f"gribcompare: RESULT=ERROR {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
