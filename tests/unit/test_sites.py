"""A site is named once and found under that name in every tree (its facts, its Spack
site, its inventory, its ReFrame systems)."""
import pytest

from iostack import sites

EXPECTED_SITES = {"local", "cray-ex", "oci-bm-optimized3"}


def test_every_spack_site_has_an_inventory_and_a_reframe_system():
    spack_sites = set(sites.spack_sites())
    assert "local" in spack_sites
    missing = {
        site: [tree for tree, names in (("ansible/inventories", sites.ansible_sites()),
                                        ("reframe-tests/config", sites.reframe_systems()))
               if site not in names]
        for site in spack_sites
    }
    assert {s: m for s, m in missing.items() if m} == {}


def test_no_tree_has_a_site_the_others_lack():
    spack_sites = set(sites.spack_sites())
    assert set(sites.ansible_sites()) - spack_sites == set()
    assert set(sites.names()) == spack_sites
    # further ReFrame systems of a site (local-slurm) are listed in its facts
    stray = {s for s in sites.reframe_systems()
             if s not in {x for site in spack_sites for x in sites.load(site).systems}}
    assert stray == set()


@pytest.mark.parametrize("site", sorted(EXPECTED_SITES))
def test_the_three_sites_exist(site):
    assert site in sites.spack_sites()


def test_unknown_site_is_a_clear_error(capsys):
    with pytest.raises(SystemExit) as e:
        sites.check_site("nowhere")
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "unknown site 'nowhere'" in err and "local" in err
