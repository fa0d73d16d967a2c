"""ReFrame's configuration as the tests read it: iostack_rfm.config's, for one site or every
site's systems together, built for an environment the test gives (never set in os.environ)."""
from __future__ import annotations

import os
import pathlib

from iostack.site import facts as site_facts
from iostack_rfm import config


def environ(state: pathlib.Path, offsite: bool = False, **env: str) -> dict[str, str]:
    return {**os.environ, "IOSTACK_RFM_STATE": str(state),
            "IOSTACK_RFM_OFFSITE": "1" if offsite else "0", **env}


def load(site: str, state: pathlib.Path, offsite: bool = False, **env: str) -> dict:
    """The configuration of one site, as reframe-tests/config/<site>.py gives ReFrame."""
    return config.site_configuration(site, environ(state, offsite, **env))


def load_all(state: pathlib.Path, offsite: bool = False, **env: str) -> dict:
    """Every site's systems and environments in one configuration (its modes, storage and
    logging are every site's)."""
    merged: dict = {}
    for site in site_facts.names():
        one = load(site, state, offsite, **env)
        if not merged:
            merged = {**one, "systems": [], "environments": []}
        merged["systems"] += one["systems"]
        merged["environments"] += one["environments"]
    return merged
