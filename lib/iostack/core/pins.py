"""Pinned versions of what set-up fetches, read from pins.json at the repository top: the
one file that set-up, `bundle` and the Ansible spack_stack role all read. Bump them there."""
import json

from iostack.core import paths

PINS_FILE = paths.REPO / "pins.json"
_PINS = json.loads(PINS_FILE.read_text())

SPACK = _PINS["spack"]
SPACK_PACKAGES = _PINS["spack_packages"]

SPACK_URL, SPACK_TAG, SPACK_COMMIT = SPACK["url"], SPACK["tag"], SPACK["commit"]
SPACK_PACKAGES_URL, SPACK_PACKAGES_TAG, SPACK_PACKAGES_COMMIT = (
    SPACK_PACKAGES["url"], SPACK_PACKAGES["tag"], SPACK_PACKAGES["commit"])
SPACK_MIN_VERSION = tuple(int(x) for x in SPACK_TAG.lstrip("v").split(".")[:2])

# actionlint for the workflow lint test, through the Go module proxy.
ACTIONLINT_MODULE = _PINS["actionlint"]
