# iostack: IOR as the stack builds it. Subclasses builtin; adds only what io500 needs.
import os

from spack_repo.builtin.packages.ior.package import Ior as BuiltinIor

from spack.package import *


class Ior(BuiltinIor):
    """IOR and mdtest, also installing the AIORI library, its headers and build.conf so
    io500 links against this install instead of cloning IOR during its own build."""

    @run_after("install")
    def install_aiori_for_io500(self):
        with working_dir(join_path(self.build_directory, "src")):
            mkdirp(self.prefix.lib, self.prefix.include.ior)
            install("libaiori.a", self.prefix.lib)
            for header in find(".", "*.h", recursive=True):
                # find() gives absolute paths; keep the tree below src/ under include/ior
                rel = os.path.relpath(header, os.getcwd())
                dest = join_path(self.prefix.include.ior, os.path.dirname(rel))
                mkdirp(dest)
                install(header, dest)
            if os.path.exists("build.conf"):
                install("build.conf", self.prefix.include.ior)
