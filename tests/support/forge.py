"""An attacker's archive: a genuine tarball rebuilt with one member's bytes changed, sound and
under the same name (and, for git archives, the same pax header naming the commit)."""
from __future__ import annotations

import io
import pathlib
import tarfile


def forge_member(genuine: pathlib.Path, out: pathlib.Path, member_name: str, added: bytes) -> None:
    """`genuine` rewritten to `out` (gzip, its pax headers kept) with `added` appended to
    member `member_name`."""
    with tarfile.open(genuine) as src, \
            tarfile.open(out, "w:gz", format=tarfile.PAX_FORMAT, pax_headers=src.pax_headers) as dst:
        found = False
        for member in src.getmembers():
            extracted = src.extractfile(member) if member.isfile() else None
            data = extracted.read() if extracted is not None else None
            if member.name == member_name and data is not None:
                data += added
                member.size = len(data)
                found = True
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    assert found, f"{genuine} has no member {member_name}"
