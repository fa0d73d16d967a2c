"""iostack's own tools, whose source is in this Spack repository beside the recipe
(<package dir>/src), not behind a URL: the repository works wherever it is added, and
nothing is downloaded.

    class NvmeStage(InRepoPackage, Package):
        version_file = "nvme-stage"                   # in src/, declares the version
        version_pattern = r"^readonly VERSION=(\\S+)$"
        version("1.1.0")
        SOURCE_SHA256 = {"1.1.0": "..."}

With nothing downloaded, Spack has no checksum to tell two sources apart. So each recipe
records the sha256 of its source tree per version (`SOURCE_SHA256`, iostack.core.digest's
tree_sha256): a changed source changes the recipe, hence the spec's hash (Spack hashes
package.py), and tests/unit/test_recipes.py fails until the recipe records it under a new
version. At install, the source must declare the spec's version.
"""
import os
import re

from spack.package import InstallError, PackageBase, copy_tree, license


class InRepoPackage(PackageBase):
    """Mixin of iostack's in-repo recipes (as key4hep-spack's Key4hepPackage): their licence
    and their source beside the recipe. They have no homepage and no maintainers' GitHub
    handles to name (builtin's conventions): this repository's README documents them."""

    license("Apache-2.0")

    # Nothing to download: the source is beside this recipe.
    has_code = False
    #: the file of src/ that declares the source's version, and the pattern capturing it
    version_file = ""
    version_pattern = ""

    @property
    def in_repo_source(self) -> str:
        return os.path.join(self.package_dir, "src")

    def checked_source(self) -> str:
        """src/, after checking that its version file declares the spec's version."""
        path = os.path.join(self.in_repo_source, self.version_file)
        if not os.path.isfile(path):
            raise InstallError(f"{self.name}: in-repo source not found at {path}")
        with open(path) as f:
            declared = re.search(self.version_pattern, f.read(), re.M)
        if not declared or declared.group(1) != str(self.spec.version):
            raise InstallError(
                f"{path} declares version {declared and declared.group(1)}, recipe builds "
                f"{self.spec.version}: update the recipe's version()")
        return self.in_repo_source

    def stage_in_repo_source(self) -> None:
        """Copy the source into the stage, so the build never reads from the repository
        after this point."""
        copy_tree(self.checked_source(), self.stage.source_path)
