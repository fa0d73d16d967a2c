#!/usr/bin/env python3
"""Stand-in for `mdadm` (this kernel has no md driver), for nvme_scratch's RAID0 path.

Every call is appended to $FAKE_MDADM_LOG, one line of space-separated arguments. Arrays
are kept in $FAKE_MDADM_STATE (JSON: name -> members); /dev/md/<name> is a symlink to
$FAKE_MDADM_STANDIN, a loop device that stands in for the array, so the role's mkfs and
mount run for real. What it answers, in real mdadm's formats:

    --create /dev/md/N --name=N --level=0 --raid-devices=K --run M...   makes array N
    --assemble /dev/md/N M...          array N again, when M... are its members
    --examine --brief M...             an ARRAY line per array with a member among M...
    --detail --brief /dev/md/N         the ARRAY line of N
"""
import json
import os
import socket
import sys
import uuid


def array_line(name, state):
    return (f"ARRAY /dev/md/{name} metadata=1.2 UUID={state['uuids'][name]} "
            f"name={socket.gethostname()}:{name}")


def link(name):
    os.makedirs("/dev/md", exist_ok=True)
    if not os.path.islink(f"/dev/md/{name}"):
        os.symlink(os.environ["FAKE_MDADM_STANDIN"], f"/dev/md/{name}")


def main(argv):
    with open(os.environ["FAKE_MDADM_LOG"], "a", encoding="utf-8") as log:
        log.write(" ".join(argv) + "\n")
    path = os.environ["FAKE_MDADM_STATE"]
    state = json.load(open(path, encoding="utf-8")) if os.path.exists(path) else {"arrays": {}, "uuids": {}}
    if argv[:1] == ["--create"]:
        name = argv[1].removeprefix("/dev/md/")
        state["arrays"][name] = [a for a in argv[2:] if not a.startswith("--")]
        state["uuids"][name] = str(uuid.uuid4())
        link(name)
    elif argv[:1] == ["--assemble"]:
        name = argv[1].removeprefix("/dev/md/")
        if sorted(state["arrays"].get(name, [])) != sorted(argv[2:]):
            print(f"mdadm: no array {name} on {' '.join(argv[2:])}", file=sys.stderr)
            return 1
        link(name)
    elif argv[:2] == ["--examine", "--brief"]:
        lines = [array_line(n, state) for n, members in state["arrays"].items()
                 if set(members) & set(argv[2:])]
        if not lines:
            print("mdadm: No md superblock detected", file=sys.stderr)
            return 1
        print("\n".join(lines))
    elif argv[:2] == ["--detail", "--brief"]:
        name = argv[2].removeprefix("/dev/md/")
        if name not in state["arrays"]:
            return 1
        print(array_line(name, state))
    else:
        print(f"fake mdadm: unsupported {argv}", file=sys.stderr)
        return 2
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(state, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
