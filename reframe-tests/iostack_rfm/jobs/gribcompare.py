"""Compare two GRIB files field by field: counts, bytes, checksums and grib_compare.

[OIFS-HECToR] validated FDB output by extracting fields with the GRIB tools and comparing them
with the non-FDB GRIB files: they had to be bit-identical. FDB returns fields in request
order, not in archive order, so messages are matched by the field they hold, not by
position. ecCodes reads everything: where each message starts and ends (`offset`,
`totalLength`), and the field's identity, its full MARS key set (namespace `mars`, as
`grib_ls -j -n mars` reports it, so surface fields have no levelist and ensemble members a
number). Editions 1 and 2 alike.

    python3 -m iostack_rfm.jobs.gribcompare compare REFERENCE CANDIDATE [--expect N]
    python3 -m iostack_rfm.jobs.gribcompare flip-bit FILE [--message K]
    python3 -m iostack_rfm.jobs.gribcompare requests FILE
    python3 -m iostack_rfm.jobs.gribcompare gather FILE|DIRECTORY OUT

`compare` exits 0 only when every message of each file has a byte-identical twin holding
the same field in the other (so reordering alone is no difference, but a missing message,
an extra duplicate, or a message whose bytes differ under the same keys is), N messages
each when --expect is given, and grib_compare finds no difference between the twins.
Anything else exits 1 with the reasons on the `gribcompare: RESULT=` line; a file ecCodes
cannot read exits 2 (`RESULT=ERROR`). `flip-bit` flips one bit in the middle of one
message's packed data (the self-test that proves `compare` can fail). `requests` prints
MARS retrieve requests that cover the file's fields, one per MARS key set. `gather`
concatenates a model's GRIB output (a file, or the files under a directory in which ecCodes
finds messages, in name order) into one file. Standard library only; the ecCodes tools
(grib_ls, grib_compare) come from PATH.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import mmap
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass


class GribError(ValueError):
    pass


@dataclass(frozen=True)
class Message:
    index: int                              # 0-based position in its file
    offset: int                             # in bytes, as ecCodes reports it
    length: int                             # totalLength
    edition: str
    keys: tuple[tuple[str, str], ...]       # the MARS keys, in ecCodes' order
    sha256: str

    @property
    def field(self) -> tuple[tuple[str, str], ...]:
        """What the message holds: its MARS keys, independent of their order."""
        return tuple(sorted(self.keys))

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in self.keys)


def _grib_ls(path: str, *options: str) -> list[dict[str, str]]:
    """grib_ls -j: one dict per message, every value as ecCodes printed it (text, so
    expver 0001 and param 129.128 keep their form)."""
    p = subprocess.run(["grib_ls", "-j", *options, path], capture_output=True, text=True)
    lines = (p.stderr + p.stdout).splitlines()
    problem = next((x.strip().strip('"') for x in lines if "ERROR" in x), None)
    if p.returncode != 0 or problem:
        raise GribError(f"{path}: grib_ls: {problem or f'exit status {p.returncode}'}")
    if '"messages"' not in p.stdout:
        return []       # no GRIB message: grib_ls prints no header, only the closing brackets
    return json.loads(p.stdout, parse_int=str, parse_float=str)["messages"]


def read(path: str) -> list[Message]:
    """Every message of a GRIB file, located and identified by ecCodes."""
    fields = _grib_ls(path, "-n", "mars")
    layout = _grib_ls(path, "-p", "offset:i,totalLength:i,edition:i")
    if len(fields) != len(layout):
        raise GribError(f"{path}: ecCodes listed {len(fields)} key sets for {len(layout)} messages")
    if not layout:
        return []
    messages = []
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for i, (keys, where) in enumerate(zip(fields, layout, strict=True)):
            offset, length = int(where["offset"]), int(where["totalLength"])
            body = data[offset:offset + length]
            if len(body) != length:
                raise GribError(f"{path}: message {i} ends beyond the file")
            messages.append(Message(i, offset, length, where["edition"], tuple(keys.items()),
                                    hashlib.sha256(body).hexdigest()))
    return messages


def message_bytes(path: str, messages: list[Message]):
    """The bytes of each message, one at a time (a model's output can be gigabytes)."""
    with open(path, "rb") as f:
        for m in messages:
            f.seek(m.offset)
            yield f.read(m.length)


@dataclass
class Matching:
    pairs: list[tuple[Message, Message]]    # (reference, candidate) holding the same field
    missing: list[Message]                  # reference messages without a twin
    extra: list[Message]                    # candidate messages without a twin

    @property
    def differing(self) -> list[tuple[Message, Message]]:
        return [(r, c) for r, c in self.pairs if r.sha256 != c.sha256]


def match(reference: list[Message], candidate: list[Message]) -> Matching:
    """Pair messages holding the same field, byte-identical ones first (so duplicates of a
    field, and files whose MARS keys say little, pair up regardless of order); what is left
    of a field pairs in file order, then counts as missing or extra."""
    by_field: dict = collections.defaultdict(lambda: ([], []))
    for m in reference:
        by_field[m.field][0].append(m)
    for m in candidate:
        by_field[m.field][1].append(m)
    pairs, missing, extra = [], [], []
    for refs, cands in by_field.values():
        left = list(cands)
        unmatched = []
        for r in refs:
            twin = next((c for c in left if c.sha256 == r.sha256), None)
            if twin is None:
                unmatched.append(r)
            else:
                left.remove(twin)
                pairs.append((r, twin))
        pairs += zip(unmatched, left, strict=False)
        missing += unmatched[len(left):]
        extra += left[len(unmatched):]
    pairs.sort(key=lambda p: p[0].index)
    return Matching(pairs, missing, extra)


def _grib_compare(reference: str, candidate: str, pairs) -> int:
    """grib_compare's exit status on both sides of the pairs, written in the same order."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for side, path in enumerate((reference, candidate)):
            out = os.path.join(tmp, f"{side}.grib")
            with open(out, "wb") as f:
                f.writelines(message_bytes(path, [p[side] for p in pairs]))
            paths.append(out)
        return subprocess.run(["grib_compare", *paths], capture_output=True).returncode


def compare(reference: str, candidate: str, expect: int | None = None, out=sys.stdout) -> bool:
    def say(line):
        print(f"gribcompare: {line}", file=out)

    ref, cand = read(reference), read(candidate)
    for name, path, msgs in (("reference", reference, ref), ("candidate", candidate, cand)):
        size = sum(m.length for m in msgs)
        say(f"{name}={path} messages={len(msgs)} bytes={size} "
            f"outside-messages={os.path.getsize(path) - size} editions="
            + "/".join(sorted({m.edition for m in msgs})))
    shared = len(ref) - len({m.field for m in ref})
    if shared:
        say(f"reference has {shared} messages whose MARS keys another message has too")
    m = match(ref, cand)
    for r, c in m.pairs:
        same = r.sha256 == c.sha256
        say(f"field={r.label} sha256={r.sha256} "
            + ("identical" if same else f"DIFFERENT candidate={c.sha256}"))
    for r in m.missing:
        say(f"field={r.label} MISSING from the candidate (reference message {r.index})")
    for c in m.extra:
        say(f"field={c.label} EXTRA in the candidate (candidate message {c.index})")
    differing = m.differing
    say(f"matched={len(m.pairs)} missing={len(m.missing)} extra={len(m.extra)} "
        f"identical={len(m.pairs) - len(differing)} differing={len(differing)}")
    gc_rc = _grib_compare(reference, candidate, m.pairs) if m.pairs else None
    say(f"grib_compare={'not-run' if gc_rc is None else ('ok' if gc_rc == 0 else 'DIFFERENT')}")

    reasons = []
    if not ref:
        reasons.append("reference is empty")
    if not cand:
        reasons.append("candidate is empty (nothing retrieved)")
    if expect is not None and (len(ref) != expect or len(cand) != expect):
        reasons.append(f"expected {expect} messages")
    if m.missing or m.extra:
        reasons.append(f"{len(m.missing)} missing, {len(m.extra)} extra messages")
    if differing:
        reasons.append(f"{len(differing)} messages differ in bytes")
    if gc_rc not in (0, None):
        reasons.append("grib_compare reports differences")
    say("RESULT=IDENTICAL" if not reasons else "RESULT=DIFFERENT reason=" + "; ".join(reasons))
    return not reasons


def flip_bit(path: str, message: int = 0) -> int:
    """Flip the lowest bit of the middle byte of one message's packed data (between
    ecCodes' offsetBeforeData and offsetAfterData, GRIB1 and GRIB2 alike), in place, so
    the message stays readable with the same keys. Returns the byte's offset in the file."""
    layout = _grib_ls(path, "-p", "offset:i,offsetBeforeData:i,offsetAfterData:i")
    if not 0 <= message < len(layout):
        raise GribError(f"{path} has {len(layout)} messages, no message {message}")
    where = layout[message]
    try:
        before, after = int(where["offsetBeforeData"]), int(where["offsetAfterData"])
    except ValueError:
        raise GribError(f"{path}: ecCodes locates no packed data in message {message}") from None
    if after <= before:
        raise GribError(f"{path}: message {message} has no packed data (a constant field)")
    byte = int(where["offset"]) + (before + after) // 2
    with open(path, "r+b") as f:
        f.seek(byte)
        value = f.read(1)[0]
        f.seek(byte)
        f.write(bytes([value ^ 0x01]))
    return byte


def gather(source: str, out: str) -> int:
    """Concatenate the GRIB files at `source` into `out`; returns their message count."""
    if os.path.isdir(source):
        files = sorted(os.path.join(d, f) for d, _, names in os.walk(source) for f in names)
    else:
        files = [source]
    total = 0
    with open(out, "wb") as target:
        for path in files:
            messages = read(path)
            if messages:
                total += len(messages)
                target.writelines(message_bytes(path, messages))
    if not total:
        raise GribError(f"{source}: no GRIB messages")
    return total


# MARS keys a request may give several values of; the others name one request each
REQUEST_AXES = ("date", "time", "step", "number", "levelist", "param", "hdate", "fcmonth",
                "frequency", "direction", "channel")


def requests(messages: list[Message]) -> list[str]:
    """MARS retrieve requests covering the messages' fields: one per MARS key set and value
    of its single-valued keys (class, stream, type, levtype, ...), each axis key (date,
    step, number, param, ...) with the values the messages have, in order of appearance."""
    groups: dict[tuple, dict[str, list[str]]] = {}
    for m in messages:
        group = tuple((k, v if k not in REQUEST_AXES else None) for k, v in m.keys)
        values = groups.setdefault(group, {k: [] for k, _ in m.keys})
        for k, v in m.keys:
            if v not in values[k]:
                values[k].append(v)
    return ["retrieve," + ",".join(f"{k}={'/'.join(v)}" for k, v in values.items())
            for values in groups.values()]


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
    rq = sub.add_parser("requests")
    rq.add_argument("file")
    ga = sub.add_parser("gather")
    ga.add_argument("source")
    ga.add_argument("out")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "compare":
            return 0 if compare(args.reference, args.candidate, args.expect) else 1
        if args.cmd == "requests":
            print("\n".join(requests(read(args.file))))
            return 0
        if args.cmd == "gather":
            print(f"gribcompare: gathered {gather(args.source, args.out)} messages into {args.out}")
            return 0
        byte = flip_bit(args.file, args.message)
        print(f"gribcompare: flipped bit 0 of byte {byte} in message {args.message} of {args.file}")
        return 0
    except (GribError, OSError) as e:
        print(f"gribcompare: RESULT=ERROR {e}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
