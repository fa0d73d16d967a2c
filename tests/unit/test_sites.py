"""A site is named once and found under that name in every tree."""
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
    # ReFrame and Ansible may add variants of a site that share its stack, named
    # <site>-<variant> (local-slurm, local-cluster)
    stray = {s for s in set(sites.reframe_systems()) | set(sites.ansible_sites())
             if s not in spack_sites and not any(s.startswith(p + "-") for p in spack_sites)}
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
