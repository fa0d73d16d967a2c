"""A lock's version is declared when our recipe or the builtin recipe it subclasses has it."""
from iostack.spack import recipes

BUILTIN = '''from spack.package import *


class Ecbuild(CMakePackage):
    version("3.7.2", sha256="7a2d192cef1e53dc5431a688b2e316251b017d25808190faed485903594a3fb9")
    version("3.6.5", sha256="98bff3d3c269f973f4bfbe29b4de834cd1d43f15b1c8d1941ee2bfe15e3d4f7f")
'''
SUBCLASS = '''from spack_repo.builtin.packages.ecbuild.package import Ecbuild as BuiltinEcbuild

from spack.package import *


class Ecbuild(BuiltinEcbuild):
    version("3.8.5", sha256="aa0c44cab0fffec4c0b3542e91ebcc736b3d41b68a068d30c023ec0df5f93425")
'''


def layout(tmp_path, ours_text):
    builtin = tmp_path / "spack-packages" / recipes.BUILTIN_PACKAGES / "ecbuild" / "package.py"
    builtin.parent.mkdir(parents=True)
    builtin.write_text(BUILTIN)
    ours = tmp_path / "iostack" / "ecbuild" / "package.py"
    ours.parent.mkdir(parents=True)
    ours.write_text(ours_text)
    return ours, tmp_path / "spack-packages"


def test_a_subclass_declares_its_versions_and_builtins(tmp_path):
    ours, pkgs = layout(tmp_path, SUBCLASS)
    assert recipes.declared_versions(ours, pkgs) == {"3.8.5", "3.7.2", "3.6.5"}


def test_a_recipe_that_does_not_subclass_builtin_declares_only_its_own(tmp_path):
    ours, pkgs = layout(tmp_path, SUBCLASS.replace("(BuiltinEcbuild)", "(CMakePackage)"))
    assert recipes.declared_versions(ours, pkgs) == {"3.8.5"}


def test_without_the_builtin_repo_only_our_versions_count(tmp_path):
    ours, _ = layout(tmp_path, SUBCLASS)
    assert recipes.declared_versions(ours, None) == {"3.8.5"}
    assert recipes.declared_versions(ours, tmp_path / "elsewhere") == {"3.8.5"}
