"""bin/iostack's --site: one of the sites (a Spack environment with its facts), or one clear
line. That each site is found under its name in every tree is tests/unit/test_site_facts.py."""
import pytest

from iostack.site import facts

EXPECTED_SITES = {"local", "cray-ex", "oci-bm-optimized3"}


@pytest.mark.parametrize("site", sorted(EXPECTED_SITES))
def test_the_three_sites_exist(site):
    assert facts.check_site(site) == site


def test_unknown_site_is_a_clear_error():
    with pytest.raises(facts.FactsError) as e:
        facts.check_site("nowhere")
    assert e.value.exit_code == 2
    assert "unknown site 'nowhere'" in str(e.value) and "local" in str(e.value)
