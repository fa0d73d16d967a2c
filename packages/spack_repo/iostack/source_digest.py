"""The content digest of a source tree, the same whether it is a git checkout, a `git archive`
of its commit, or the tarball a Spack mirror keeps for it (Spack's own, or one made with
`git archive`): sha256 over its files and symbolic links, sorted by path below the top
directory, each as `path NUL kind NUL sha256-of-bytes-or-link-target NL`, kind `x` for a file
its owner may execute, `-` for another file, `l` for a link. Directories, modes beyond the
owner's execute bit, owners and times are left out, as they differ between those three.

Spack checks a source it downloads against the sha256 its recipe records, but a source
pinned to a git commit and taken from a mirror comes with no checksum at all (Spack warns
and goes on). git_sources.py checks such sources against this digest. It is derived from
the commit alone, by anyone:

    git -C REPO archive --format=tar --prefix=src/ COMMIT | python3 source_digest.py -

Standard library only; also `python3 source_digest.py ARCHIVE.tar.gz|DIR`."""
import hashlib
import os
import sys
import tarfile


def _entry(path: str, kind: str, digest: str) -> bytes:
    return f"{path}\0{kind}\0{digest}\n".encode()


def _combine(entries) -> str:
    h = hashlib.sha256()
    for line in sorted(entries):
        h.update(line)
    return h.hexdigest()


def of_tar(tar: tarfile.TarFile) -> str:
    """The digest of an archive whose members sit under one top directory."""
    entries = []
    for member in tar:
        parts = member.name.strip("/").split("/")[1:]
        if not parts or member.isdir():
            continue
        path = "/".join(parts)
        if member.issym():
            entries.append(_entry(path, "l", hashlib.sha256(member.linkname.encode()).hexdigest()))
        elif member.isfile() or member.islnk():
            data = tar.extractfile(member).read()
            kind = "x" if member.mode & 0o100 else "-"
            entries.append(_entry(path, kind, hashlib.sha256(data).hexdigest()))
    return _combine(entries)


def of_archive(path: str) -> str:
    with tarfile.open(path) as tar:
        return of_tar(tar)


def of_dir(top: str, skip=(".git",)) -> str:
    """The digest of a checked-out tree (its top-level `skip` entries left out)."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(top):
        if dirpath == top:
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in skip]
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, top).replace(os.sep, "/")
            if os.path.islink(full):
                target = os.readlink(full)
                entries.append(_entry(rel, "l", hashlib.sha256(target.encode()).hexdigest()))
            elif os.path.isfile(full):
                with open(full, "rb") as f:
                    data = hashlib.sha256(f.read()).hexdigest()
                entries.append(_entry(rel, "x" if os.stat(full).st_mode & 0o100 else "-", data))
    return _combine(entries)


def main(argv):
    (where,) = argv
    if where == "-":
        with tarfile.open(fileobj=sys.stdin.buffer, mode="r|*") as tar:
            print(of_tar(tar))
    elif os.path.isdir(where):
        print(of_dir(where))
    else:
        print(of_archive(where))


if __name__ == "__main__":
    main(sys.argv[1:])
