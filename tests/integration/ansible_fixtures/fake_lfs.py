#!/usr/bin/env python3
"""Stand-in for Lustre's `lfs` (no Lustre here): getstripe -d / setstripe -c -S.

The default layout of a directory is kept in <dir>/.fake-lfs-layout; each
call is appended to $FAKE_LFS_LOG so tests can see what the role ran.
"""
import os
import sys

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def size_bytes(text: str) -> int:
    text = text.upper().rstrip("B")
    return int(text[:-1]) * UNITS[text[-1]] if text[-1] in UNITS else int(text)


def main(argv):
    if os.environ.get("FAKE_LFS_LOG"):
        with open(os.environ["FAKE_LFS_LOG"], "a", encoding="utf-8") as log:
            log.write(" ".join(argv) + "\n")
    cmd, args = argv[0], argv[1:]
    path = args[-1]
    state = os.path.join(path, ".fake-lfs-layout")
    if cmd == "getstripe" and "-d" in args:
        if os.path.exists(state):
            count, size = open(state, encoding="utf-8").read().split()
            print(f"stripe_count:  {count} stripe_size:   {size} pattern:       raid0 stripe_offset: -1")
        return 0
    if cmd == "setstripe":
        opts = dict(zip(args[:-1:2], args[1:-1:2], strict=True))
        with open(state, "w", encoding="utf-8") as fh:
            fh.write(f"{int(opts['-c'])} {size_bytes(opts['-S'])}\n")
        return 0
    print(f"fake lfs: unsupported {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
