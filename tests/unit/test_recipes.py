"""Recipes in packages/ that reuse a builtin name must subclass the builtin recipe."""
import ast
import re

import pytest

from iostack.core import digest, paths
from support import targets

PACKAGES = paths.REPO / "packages" / "spack_repo" / "iostack" / "packages"
BUILTIN_NAMES_WE_EXTEND = {"ecbuild", "eccodes", "eckit", "ecmwf_atlas", "fckit", "fdb", "metkit"}


def builtin_names():
    """Names in the pinned builtin repo when it is here, else the ones we know we extend."""
    from iostack.spack import runner

    try:
        _, pkgs = runner.locate(targets.settings())
    except runner.SpackMissing:
        return BUILTIN_NAMES_WE_EXTEND
    return {p.name for p in (pkgs / "repos/spack_repo/builtin/packages").iterdir()}


def recipes():
    return sorted(p.parent.name for p in PACKAGES.glob("*/package.py"))


def builtin_imports(tree):
    """{local alias: builtin package dir} for `from spack_repo.builtin.packages.X.package import C`."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
                "spack_repo.builtin.packages."):
            pkg = node.module.split(".")[3]
            for alias in node.names:
                out[alias.asname or alias.name] = pkg
    return out


@pytest.mark.parametrize("name", recipes())
def test_recipe_shadowing_a_builtin_subclasses_it(name):
    tree = ast.parse((PACKAGES / name / "package.py").read_text())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    assert len(classes) == 1, "one package class per recipe"
    imported = builtin_imports(tree)
    bases = {b.id for b in classes[0].bases if isinstance(b, ast.Name)}
    if name in builtin_names() or name in BUILTIN_NAMES_WE_EXTEND:
        assert any(imported.get(b) == name for b in bases), f"{name} must subclass builtin {name}"


def test_the_extended_builtins_are_all_here():
    assert BUILTIN_NAMES_WE_EXTEND <= set(recipes())


# --- in-repo sources: a changed source needs a new version --------------------------------

def in_repo_recipes():
    """(recipe, version, {version: recorded sha256}) of each recipe whose source is beside it."""
    out = []
    for name in recipes():
        text = (PACKAGES / name / "package.py").read_text()
        if "(InRepoPackage," in text:
            version = re.search(r'version\("([^"]+)"\)', text).group(1)
            recorded = dict(re.findall(r'"([\d.]+)":\s*"([0-9a-f]{64})"', text))
            out.append((name, version, recorded))
    return out


def test_the_in_repo_recipes_are_the_three_tools():
    assert [r[0] for r in in_repo_recipes()] == ["fdb_archive_bench", "netcdf_output_bench",
                                                 "nvme_stage"]


@pytest.mark.parametrize("name,version,recorded", in_repo_recipes(),
                         ids=[r[0] for r in in_repo_recipes()])
def test_in_repo_source_is_the_one_its_version_names(name, version, recorded):
    source = PACKAGES / name / "src"
    actual = digest.tree_sha256(source)
    assert recorded.get(version) == actual, (
        f"{source} changed: give {name} a new version (in its source and its recipe) "
        f"and record SOURCE_SHA256 {{'<new>': '{actual}'}}")
    # the tests and the checks build it through src/<name>
    link = paths.REPO / "src" / name.replace("_", "-")
    assert link.is_symlink() and link.resolve() == source.resolve()


def test_a_changed_tree_has_another_digest(tmp_path):
    (tmp_path / "main.c").write_text("int main(void) { return 0; }\n")
    before = digest.tree_sha256(tmp_path)
    (tmp_path / "main.c").write_text("int main(void) { return 1; }\n")
    assert digest.tree_sha256(tmp_path) != before
