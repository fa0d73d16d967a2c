"""Recipes in packages/ that reuse a builtin name must subclass the builtin recipe."""
import ast

import pytest

from iostack import paths

PACKAGES = paths.REPO / "packages" / "spack_repo" / "iostack" / "packages"
BUILTIN_NAMES_WE_EXTEND = {"eccodes", "eckit", "fdb", "metkit"}


def builtin_names():
    """Names in the pinned builtin repo when it is here, else the ones we know we extend."""
    from iostack import spack

    try:
        _, pkgs = spack.locate()
    except spack.SpackMissing:
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
