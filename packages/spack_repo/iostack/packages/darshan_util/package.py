# iostack: Darshan's log utilities (darshan-parser, darshan-job-summary, libdarshan-util
# that PyDarshan reads logs with). Subclasses builtin; only the source changes (darshan.py).
from spack_repo.builtin.packages.darshan_util.package import DarshanUtil as BuiltinDarshanUtil
from spack_repo.iostack.darshan import DarshanFromTag

from spack.package import *


class DarshanUtil(DarshanFromTag, BuiltinDarshanUtil):
    """Darshan's utilities for the logs darshan-runtime writes."""
