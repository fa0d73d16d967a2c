"""Versions a recipe of ours declares, counting those it inherits from builtin's recipe.

Our recipes that reuse a builtin name subclass builtin's and add versions (ecbuild adds
3.8.5; 3.7.2 is builtin's), so a lock pinning an inherited version is not stale.
"""
import ast
import pathlib

BUILTIN_PACKAGES = pathlib.Path("repos") / "spack_repo" / "builtin" / "packages"


def _own_versions(tree: ast.AST) -> set[str]:
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "version" and node.args
            and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}


def _builtin_bases(tree: ast.AST) -> set[str]:
    """Builtin package directories whose classes the recipe's classes subclass."""
    imported = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
                "spack_repo.builtin.packages."):
            for alias in node.names:
                imported[alias.asname or alias.name] = node.module.split(".")[3]
    return {imported[base.id] for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
            for base in node.bases if isinstance(base, ast.Name) and base.id in imported}


def declared_versions(recipe: pathlib.Path, spack_packages: pathlib.Path | None) -> set[str]:
    """Versions `recipe` declares, with those of the builtin recipes it subclasses (found in
    the spack-packages checkout `spack_packages`; None: without them)."""
    tree = ast.parse(recipe.read_text(), str(recipe))
    versions = _own_versions(tree)
    if spack_packages is not None:
        builtin_dir = spack_packages / BUILTIN_PACKAGES
        for name in _builtin_bases(tree):
            base = builtin_dir / name / "package.py"
            if base.resolve() != recipe.resolve() and base.is_file():
                versions |= declared_versions(base, spack_packages)
    return versions
