"""The GRIB message splitter and bit flipper, on hand-built GRIB2 byte strings."""
import hashlib

import pytest

from iostack_rfm import gribcompare


def grib2(payload: bytes) -> bytes:
    """A minimal GRIB2 message: section 0, one section 7 holding payload, then 7777."""
    sec7 = (5 + len(payload)).to_bytes(4, "big") + b"\x07" + payload
    total = 16 + len(sec7) + 4
    return b"GRIB\x00\x00\x00\x02" + total.to_bytes(8, "big") + sec7 + b"7777"


def test_split_finds_every_message_and_its_bytes():
    msgs = [grib2(bytes([i]) * (10 + i)) for i in range(5)]
    assert gribcompare.split_messages(b"".join(msgs)) == msgs


def test_split_rejects_a_truncated_message():
    data = grib2(b"abcdef")[:-2]
    with pytest.raises(gribcompare.GribFormatError):
        gribcompare.split_messages(data)


def test_split_rejects_a_message_not_ending_in_7777():
    data = bytearray(grib2(b"abcdef"))
    data[-1:] = b"X"
    with pytest.raises(gribcompare.GribFormatError):
        gribcompare.split_messages(bytes(data))


def test_flip_bit_changes_exactly_one_bit_in_the_chosen_message(tmp_path):
    msgs = [grib2(bytes(range(32))) for _ in range(3)]
    f = tmp_path / "x.grib"
    f.write_bytes(b"".join(msgs))
    gribcompare.flip_bit(str(f), message=1)
    after = gribcompare.split_messages(f.read_bytes())
    assert after[0] == msgs[0] and after[2] == msgs[2]
    diff = [a ^ b for a, b in zip(after[1], msgs[1], strict=True)]
    assert sum(bin(d).count("1") for d in diff) == 1
    # the flipped bit is inside section 7's payload, so the message stays well formed
    offset, length = gribcompare.data_section_offset(msgs[1])
    changed = next(i for i, d in enumerate(diff) if d)
    assert offset <= changed < offset + length
    assert hashlib.sha256(after[1]).hexdigest() != hashlib.sha256(msgs[1]).hexdigest()


def test_flip_bit_refuses_a_message_that_is_not_there(tmp_path):
    f = tmp_path / "x.grib"
    f.write_bytes(grib2(b"abc"))
    with pytest.raises(gribcompare.GribFormatError):
        gribcompare.flip_bit(str(f), message=3)
