"""system-packages.toml: what set-up installs, by purpose and Debian release."""
import pathlib

import pytest
import yaml

from iostack.core import paths
from iostack.offline import setup

DATA = pathlib.Path(__file__).parent.parent / "data" / "os-release"


def site_debian_packages(site: str) -> set[str]:
    data = yaml.safe_load((paths.SPACK_ENV_SITES / site / "packages.yaml").read_text())
    return {(ext.get("extra_attributes") or {}).get("debian")
            for cfg in data["packages"].values() for ext in cfg.get("externals", [])} - {None}


def test_deploying_local_installs_every_package_its_externals_name():
    """On a fresh node, an external whose package set-up does not install makes Spack build
    it from a source the mirror does not have."""
    assert site_debian_packages("local") - set(setup.apt_packages("bookworm", ("deploy",))) == set()


@pytest.mark.parametrize("release", ["bookworm", "trixie"])
def test_every_release_has_a_name_for_every_package(release):
    table = setup._table()
    for purpose in setup.PURPOSES:
        for entry in table[purpose]["packages"]:
            if isinstance(entry, dict):
                assert set(entry) == set(setup.known_releases()), entry


def test_a_package_is_listed_for_one_purpose_only():
    seen = {}
    for purpose in setup.PURPOSES:
        for name in setup.apt_packages("bookworm", (purpose,)):
            assert name not in seen, f"{name} in {seen.get(name)} and {purpose}"
            seen[name] = purpose


def test_testing_needs_everything_deploying_needs():
    every = setup.apt_packages("trixie", setup.PURPOSES)
    assert set(setup.apt_packages("trixie", ("deploy",))) < set(every)
    assert "python3.13" in every and "python3.11" not in every


@pytest.mark.parametrize("release,name", [("bookworm", "Debian GNU/Linux 12 (bookworm)"),
                                          ("trixie", "Debian GNU/Linux 13 (trixie)")])
def test_the_release_is_read_from_a_real_os_release(release, name):
    info = setup.os_release(DATA / release)
    assert info["PRETTY_NAME"] == name
    assert setup.debian_release(info) == release


def test_another_os_is_refused_naming_what_set_up_knows():
    info = setup.os_release(DATA / "trixie")
    info.update(VERSION_CODENAME="forky", PRETTY_NAME="Debian GNU/Linux 14 (forky)")
    with pytest.raises(setup.SetupRefused, match=r"knows Debian 12 \(bookworm\), Debian 13 "
                                                 r"\(trixie\), not Debian GNU/Linux 14 \(forky\)"):
        setup.debian_release(info)
