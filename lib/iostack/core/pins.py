"""Pinned versions of what set-up fetches, read from pins.json at the repository top: the
one file that set-up, `bundle` and the Ansible spack_stack role all read. Bump them there.
Read on first use (`pins.SPACK_TAG`), so that importing iostack needs no repository."""
from __future__ import annotations

import functools
import json
from typing import Any

from iostack.core import paths

PINS_FILE = paths.REPO / "pins.json"


@functools.cache
def _pins() -> dict[str, Any]:
    pins = json.loads(PINS_FILE.read_text())
    spack, packages = pins["spack"], pins["spack_packages"]
    return {
        "SPACK": spack, "SPACK_PACKAGES": packages,
        "SPACK_URL": spack["url"], "SPACK_TAG": spack["tag"], "SPACK_COMMIT": spack["commit"],
        "SPACK_PACKAGES_URL": packages["url"], "SPACK_PACKAGES_TAG": packages["tag"],
        "SPACK_PACKAGES_COMMIT": packages["commit"],
        "SPACK_MIN_VERSION": tuple(int(x) for x in spack["tag"].lstrip("v").split(".")[:2]),
        # fingerprints of the release keys whose signature set-up accepts on a bundle
        "RELEASE_KEYS": [f.replace(" ", "").upper() for f in pins["release_keys"]],
        # actionlint for the workflow lint test, through the Go module proxy
        "ACTIONLINT_MODULE": pins["actionlint"],
    }


def __getattr__(name: str) -> Any:
    try:
        return _pins()[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
