"""Sources pinned to git commits are checked by content (packages/spack_repo/iostack/
git_sources.py): every such source of our recipes records the content digest of its
commit's tree (source_digest.py), the same whether it is cloned, `git archive`d or kept in a
Spack mirror, and different for any changed byte, name, link or execute bit. The attack itself
(a mirror's tarball swapped under the same commit, refused by `deploy`) is in
tests/spack/test_spack_offline.py."""
import ast
import importlib.util
import io
import re
import tarfile

import pytest

from iostack.core import paths
from support.fixtures import shared_bundle

REPO_DIR = paths.REPO / "packages" / "spack_repo" / "iostack"
_spec = importlib.util.spec_from_file_location("source_digest", REPO_DIR / "source_digest.py")
source_digest = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(source_digest)

TREE = {"README": (b"pfind\n", 0o644), "compile.sh": (b"#!/bin/sh\ncc pfind.c\n", 0o755),
        "src/pfind.c": (b"int main(void) { return 0; }\n", 0o644)}


def tar_of(tree, top, *, git_like: bool) -> tarfile.TarFile:
    """The tree as `git archive` packs it (dirs first, 0664/0775, the commit's time) or as
    Spack's mirror does (sorted depth first, 0644/0755, time 0)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        names = sorted(tree, reverse=not git_like)
        for name in names:
            data, mode = tree[name]
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            info.mode = (mode | 0o020) if git_like else mode
            info.mtime = 1681716971 if git_like else 0
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo(f"{top}/pfind")
        link.type, link.linkname = tarfile.SYMTYPE, "src/pfind.c"
        tar.addfile(link)
    buf.seek(0)
    return tarfile.open(fileobj=buf)


def test_the_digest_is_the_same_from_git_archive_spacks_mirror_and_a_checkout(tmp_path):
    git = source_digest.of_tar(tar_of(TREE, "src", git_like=True))
    spack = source_digest.of_tar(tar_of(TREE, "pfind", git_like=False))
    checkout = tmp_path / "pfind"
    tar_of(TREE, "pfind", git_like=False).extractall(tmp_path)
    (checkout / ".git").mkdir()
    (checkout / ".git" / "HEAD").write_text("778dca873381ce0a35fe39f8972c906a3c2f4584\n")
    assert git == spack == source_digest.of_dir(str(checkout))


@pytest.mark.parametrize("change", [
    lambda t: t.update({"src/pfind.c": (b"int main(void) { return 1; }\n", 0o644)}),
    lambda t: t.update({"compile.sh": (t["compile.sh"][0], 0o644)}),
    lambda t: t.update({"src/evil.c": t.pop("src/pfind.c")}),
    lambda t: t.update({"extra": (b"", 0o644)}),
], ids=["one byte", "execute bit", "renamed", "added"])
def test_any_change_to_the_tree_changes_the_digest(change):
    changed = dict(TREE)
    change(changed)
    assert source_digest.of_tar(tar_of(changed, "src", git_like=True)) != \
        source_digest.of_tar(tar_of(TREE, "src", git_like=True))


# --- every git source of our recipes is pinned by content ---------------------------------

def git_sources(tree: ast.Module) -> list[str]:
    """The commits of version(commit=...) and resource(git=..., commit=...) calls."""
    return [kw.value.value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", "") in ("version", "resource")
            for kw in node.keywords if kw.arg == "commit"]


def recorded(tree: ast.Module) -> dict[str, str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "GIT_SOURCE_SHA256"
                                                 for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


RECIPES = {p.parent.name: ast.parse(p.read_text())
           for p in sorted((REPO_DIR / "packages").glob("*/package.py"))}
WITH_GIT = [name for name, tree in RECIPES.items() if git_sources(tree)]


def test_the_recipes_with_git_sources_are_the_ones_we_know():
    assert WITH_GIT == ["io500", "openifs"]


@pytest.mark.parametrize("name", WITH_GIT)
def test_each_git_source_is_a_full_commit_with_its_content_recorded(name):
    tree = RECIPES[name]
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert "GitSourcesPackage" in {getattr(b, "id", "") for b in cls.bases}, \
        f"{name} takes sources from git: it must derive GitSourcesPackage"
    commits = git_sources(tree)
    assert all(re.fullmatch(r"[0-9a-f]{40}", c) for c in commits), commits
    assert set(recorded(tree)) == set(commits)


@pytest.mark.parametrize("name", WITH_GIT)
def test_the_mirrors_tarball_of_each_commit_has_the_recorded_content(name):
    """../shared/spack's mirror holds each commit as a `git archive` (its README); the digests
    were derived from the commits in the upstream repositories and must match it."""
    mirror = shared_bundle() / "mirror" / "_source-cache" / "git"
    for commit, digest in recorded(RECIPES[name]).items():
        (tarball,) = mirror.glob(f"*/*/{commit}.tar.gz")
        assert source_digest.of_archive(str(tarball)) == digest, tarball
