# iostack_detect: fio as `spack external find` can find it (bin/iostack site init).
import re

from spack_repo.builtin.packages.fio.package import Fio as BuiltinFio

from spack.package import *


class Fio(BuiltinFio):
    """fio, detectable: builtin's recipe has no detection. `fio --version` prints
    `fio-3.33`."""

    executables = [r"^fio$"]

    @classmethod
    def determine_version(cls, exe):
        output = Executable(exe)("--version", output=str, error=str).strip()
        match = re.fullmatch(r"fio-(\d+(\.\d+)*)", output)
        return match.group(1) if match else None
