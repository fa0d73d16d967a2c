"""A site's own ecCodes definitions (facts `grib_definitions`), described once: the facts
check each entry in one line, and every tree that sets up ecCodes for the site gets them:
the Spack site's Lmod configuration (generated modules.yaml) and the ReFrame environments.
tests/integration/test_grib_local_definitions.py runs them with ecCodes and FDB."""
import dataclasses

import pytest
import yaml

from iostack.site import facts as site_facts
from iostack.site import generate
from iostack_rfm import config


#: the facts as read from sites/ (the tests below patch site_facts.load)
LOAD = site_facts.load


@pytest.fixture(autouse=True)
def _fresh_facts():
    LOAD.cache_clear()
    yield
    LOAD.cache_clear()


def declared(site: str, entries) -> site_facts.Site:
    return dataclasses.replace(LOAD(site), grib_definitions=tuple(entries))


def with_entries(tmp_path, entries):
    data = yaml.safe_load((site_facts.FACTS / "local.yaml").read_text())
    data["grib_definitions"] = entries
    path = tmp_path / "local.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_directories_and_packages_are_read_in_order(tmp_path):
    site = site_facts.read(with_entries(tmp_path, ["/opt/a", "site-defs", "/opt/b"]))
    assert site.grib_definitions == ("/opt/a", "site-defs", "/opt/b")
    assert site.grib_definition_dirs == ("/opt/a", "/opt/b")
    assert site.grib_definition_packages == ("site-defs",)
    assert site_facts.load("local").grib_definitions == ()


@pytest.mark.parametrize("entry,problem", [
    ("defs/local", "'defs/local' is neither an absolute directory (a relative path means "
                   "nothing on the nodes: give it from /) nor a Spack package's name"),
    ("Site_Defs", "'Site_Defs' is neither an absolute directory (a relative path means "
                  "nothing on the nodes: give it from /) nor a Spack package's name"),
    ("/opt/a:/opt/b", "'/opt/a:/opt/b': a directory with ':' in its name cannot be on "
                      "ecCodes' definition path (':' separates its entries)"),
    ("/opt/defs/", "'/opt/defs/': give the directory plainly (no '..', '.', '//', trailing '/')"),
    ("/opt/../defs", "'/opt/../defs': give the directory plainly (no '..', '.', '//', "
                     "trailing '/')"),
])
def test_a_bad_entry_is_named_in_one_line(tmp_path, entry, problem):
    path = with_entries(tmp_path, ["/opt/good", entry])
    with pytest.raises(site_facts.FactsError) as e:
        site_facts.read(path)
    assert str(e.value) == f"{path}: grib_definitions/1: {problem}"


def test_an_entry_twice_or_an_empty_list_fails_the_schema(tmp_path):
    for entries, message in ((["/opt/a", "/opt/a"], "has non-unique elements"),
                             ([], "should be non-empty")):
        with pytest.raises(site_facts.FactsError) as e:
            site_facts.read(with_entries(tmp_path, entries))
        assert "grib_definitions: " in str(e.value) and message in str(e.value)
        assert "\n" not in str(e.value)


def test_the_ecCodes_module_prepends_directories_and_loads_packages():
    site = declared("setonix", ["/software/site/eccodes-defs", "site-defs", "/opt/more"])
    text = generate.eccodes_modules(site)
    assert text.startswith("\n      # sites/setonix.yaml grib_definitions")
    lmod = yaml.safe_load("lmod:" + text)["lmod"]
    assert lmod == {
        "site-defs": {"environment": {"prepend_path": {
            "ECCODES_EXTRA_DEFINITION_PATH": "{prefix}/share/eccodes/definitions"}}},
        "eccodes": {"load": ["site-defs"], "environment": {"prepend_path": {
            "ECCODES_EXTRA_DEFINITION_PATH": "/software/site/eccodes-defs:/opt/more"}}}}
    assert generate.eccodes_modules(site_facts.load("setonix")) == ""


@pytest.mark.parametrize("site", site_facts.names())
def test_every_site_modules_yaml_is_generated_with_them(site, monkeypatch):
    """Each Spack site's modules.yaml comes from its modules.yaml.in: with definitions
    declared, ecCodes' module configuration sits beside the site's own."""
    (template,) = [t for t in generate.templates(site) if t.name == "modules.yaml.in"]
    plain = yaml.safe_load(generate.from_template(site, template).text)["modules"]
    monkeypatch.setattr(site_facts, "load", lambda name: declared(name, ["/opt/defs"]))
    rendered = yaml.safe_load(generate.from_template(site, template).text)["modules"]
    lmod = rendered["default"]["lmod"]
    assert lmod.pop("eccodes") == {"environment": {"prepend_path": {
        "ECCODES_EXTRA_DEFINITION_PATH": "/opt/defs"}}}
    assert rendered == plain


@pytest.mark.parametrize("site", site_facts.names())
def test_every_reframe_environment_of_the_site_sets_the_path(site, monkeypatch):
    run = config.Run.of({"IOSTACK_RFM_STATE": "/tmp/state"})
    plain = config.environments(site, run)
    monkeypatch.setattr(site_facts, "load", lambda name: declared(name, ["/opt/a", "/opt/b"]))
    envs = config.environments(site, run)
    assert [e["name"] for e in envs] == [e["name"] for e in plain]
    for env, before in zip(envs, plain, strict=True):
        assert env["env_vars"] == before["env_vars"] + [[
            "ECCODES_EXTRA_DEFINITION_PATH",
            "/opt/a:/opt/b${ECCODES_EXTRA_DEFINITION_PATH:+:$ECCODES_EXTRA_DEFINITION_PATH}"]]


def test_the_users_guide_names_them_where_the_site_has_them(monkeypatch):
    from iostack.deployment import guide

    assert guide.grib_definitions("local") == ""
    monkeypatch.setattr(site_facts, "load",
                        lambda name: declared(name, ["/opt/site/defs", "site-defs"]))
    text = guide.grib_definitions("local")
    assert "<li><code>/opt/site/defs</code></li>" in text
    assert ("<li>package <code>site-defs</code> (<code>&lt;its prefix&gt;/share/eccodes/"
            "definitions</code>)</li>") in text
    assert "<code>ECCODES_EXTRA_DEFINITION_PATH</code>" in text
