"""A site's own ecCodes definitions (sites/<site>.yaml `grib_definitions`), for real, with
Debian's ecCodes 2.28 and FDB 5.10.8.

The field: a GRIB2 field of ecCodes' own sample made a local parameter of centre 233 (eidb,
a centre ecCodes ships no local concepts for), discipline 0, parameterCategory 1,
parameterNumber 192 (WMO's range reserved for local use), with ECMWF's local section
(subCentre 98) for its MARS keys. The site's definitions name it, in the layout ecCodes
reads (grib2/localConcepts/<centre>/paramId.def, shortName.def, ...).

With the definitions on the path the site's environment puts them on (the facts, through
the ReFrame environment's ECCODES_EXTRA_DEFINITION_PATH, expanded by a shell as a job does),
ecCodes names the parameter, gribdefs lets it through, fdb-write archives it under its own
param into a fresh FDB root and fdbretrieve brings it back byte for byte; one flipped bit
of the retrieved field is told apart. Without them, FDB 5.10.8 would archive the field as
param=0 (shown here), so gribdefs refuses it first in one line.
"""
import dataclasses
import hashlib
import os
import shutil
import subprocess

import pytest
import yaml

from iostack.site import facts as site_facts
from iostack.site import generate
from iostack_rfm import config
from iostack_rfm.jobs import gribcompare

pytestmark = pytest.mark.skipif(
    not all(shutil.which(p) for p in ("grib_set", "grib_ls", "codes_info", "fdb-write",
                                      "fdb-read", "fdb-list")),
    reason="needs ecCodes' and FDB's tools (Debian: libeccodes-tools, fdb5)")

CENTRE, PARAM_ID, SHORT_NAME = "eidb", "233001", "iotp"
#: the site's definitions of its local parameter: one file per concept ecCodes reads
CONCEPTS = {"paramId": PARAM_ID, "shortName": SHORT_NAME, "name": "iostack test parameter",
            "units": "K", "cfVarName": SHORT_NAME}
IDENTITY = "\t discipline = 0 ;\n\t parameterCategory = 1 ;\n\t parameterNumber = 192 ;\n"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("grib-local-definitions")


@pytest.fixture(scope="module")
def definitions(work):
    """The site's definitions directory."""
    top = work / "site-definitions"
    concepts = top / "grib2" / "localConcepts" / CENTRE
    concepts.mkdir(parents=True)
    for concept, value in CONCEPTS.items():
        (concepts / f"{concept}.def").write_text(
            f"# iostack test parameter\n'{value}' = {{\n{IDENTITY}\t}}\n")
    return top


@pytest.fixture(scope="module")
def site(work, definitions):
    """Site local's facts with the definitions declared, read as bin/iostack reads facts."""
    data = yaml.safe_load((site_facts.FACTS / "local.yaml").read_text())
    data["grib_definitions"] = [str(definitions)]
    path = work / "local.yaml"
    path.write_text(yaml.safe_dump(data))
    return site_facts.read(path)


@pytest.fixture(scope="module")
def environ(site):
    """The job environment of the site's ReFrame environments: each sets its env_vars with
    a shell (`export NAME=VALUE`); here on top of an environment without the variable."""
    base = {k: v for k, v in os.environ.items() if k != generate.EXTRA_DEFINITION_PATH}
    (name, value), = config._grib_definitions(site)
    exported = subprocess.run(["bash", "-c", f"export {name}={value}; printf %s \"${name}\""],
                              env=base, capture_output=True, text=True, check=True).stdout
    return {**base, name: exported}, base


@pytest.fixture(scope="module")
def field(work):
    """One GRIB2 field holding the local parameter (ecCodes' sample, grib_set)."""
    samples = subprocess.run(["codes_info", "-s"], capture_output=True, text=True,
                             check=True).stdout.strip()
    # the local section follows subCentre: set it first, then the rest
    step = work / "subcentre.grib"
    subprocess.run(["grib_set", "-s", "subCentre=98", os.path.join(samples, "gg_sfc_grib2.tmpl"),
                    str(step)], check=True)
    out = work / "local-param.grib"
    subprocess.run(["grib_set", "-s", "centre=233,class=rd,expver=xxxx,stream=oper,type=fc,"
                    "step=6,parameterCategory=1,parameterNumber=192", str(step), str(out)],
                   check=True)
    return out


def grib_ls(path, env, keys="centre,paramId,shortName"):
    p = subprocess.run(["grib_ls", "-j", "-p", keys, str(path)], env=env, capture_output=True,
                       text=True, check=True)
    return yaml.safe_load(p.stdout)["messages"]


def gribdefs(path, env):
    return subprocess.run(["python3", "-m", "iostack_rfm.jobs.gribdefs", "check", str(path)],
                          env=env, capture_output=True, text=True)


def fdb(work, name, env):
    """A fresh FDB root and its config (iostack.deployment.fdbconfig), in `env`."""
    subprocess.run(["python3", "-m", "iostack.deployment.fdbconfig", "--root",
                    str(work / name / "root"), "--out", str(work / name / "fdb.yaml")],
                   check=True, env=env, capture_output=True)
    return {**env, "FDB5_CONFIG_FILE": str(work / name / "fdb.yaml")}


def test_the_site_environment_puts_the_definitions_before_ecCodes_own(site, environ,
                                                                       definitions):
    with_defs, _ = environ
    assert site.grib_definitions == (str(definitions),)
    assert with_defs[generate.EXTRA_DEFINITION_PATH] == str(definitions)
    path = subprocess.run(["codes_info", "-d"], env=with_defs, capture_output=True, text=True,
                          check=True).stdout.strip()
    assert path == f"{definitions}:/usr/share/eccodes/definitions"
    # the site's Lmod configuration of ecCodes prepends the same directory
    modules = yaml.safe_load("lmod:" + generate.eccodes_modules(site, indent=2))
    assert modules["lmod"]["eccodes"] == {"environment": {"prepend_path": {
        "ECCODES_EXTRA_DEFINITION_PATH": str(definitions)}}}


def test_with_the_definitions_the_field_archives_and_retrieves_bit_for_bit(work, field,
                                                                           environ):
    with_defs, _ = environ
    assert grib_ls(field, with_defs) == [{"centre": CENTRE, "paramId": int(PARAM_ID),
                                          "shortName": SHORT_NAME}]
    p = gribdefs(field, with_defs)
    assert (p.returncode, p.stdout, p.stderr) == (
        0, f"gribdefs: OK {field} messages=1 params={PARAM_ID}/{SHORT_NAME}\n", "")
    env = fdb(work, "with", with_defs)
    archive = subprocess.run(["fdb-write", str(field)], env=env, capture_output=True, text=True)
    assert archive.returncode == 0, archive.stderr
    assert "FDB archive 1 message," in archive.stdout
    listed = subprocess.run(["fdb-list", "--all", "--minimum-keys="], env=env,
                            capture_output=True, text=True, check=True).stdout
    assert f"{{step=6,param={PARAM_ID}}},length={field.stat().st_size}" in listed
    out = work / "retrieved.grib"
    back = subprocess.run(["python3", "-m", "iostack_rfm.jobs.fdbretrieve", str(field),
                           str(out)], env=env, capture_output=True, text=True)
    assert back.returncode == 0, back.stdout + back.stderr
    # FDB 5.10.8's metkit knows no param 233001 to expand: the raw request retrieves it
    assert "fdbretrieve: requests=1 expanded=0 raw=1" in back.stdout
    assert out.read_bytes() == field.read_bytes()
    assert hashlib.sha256(out.read_bytes()).hexdigest() == \
        hashlib.sha256(field.read_bytes()).hexdigest()
    compare = subprocess.run(["python3", "-m", "iostack_rfm.jobs.gribcompare", "compare",
                              str(field), str(out), "--expect", "1"], env=with_defs,
                             capture_output=True, text=True)
    assert compare.returncode == 0
    assert "gribcompare: matched=1 missing=0 extra=0 identical=1 differing=0" in compare.stdout
    assert "gribcompare: RESULT=IDENTICAL" in compare.stdout
    # the control: one bit of the retrieved field flipped, and the comparison fails
    flipped = work / "flipped.grib"
    shutil.copy(out, flipped)
    gribcompare.flip_bit(str(flipped), 0)
    diff = [(a, b) for a, b in zip(flipped.read_bytes(), field.read_bytes(), strict=True)
            if a != b]
    assert len(diff) == 1 and bin(diff[0][0] ^ diff[0][1]).count("1") == 1
    compare = subprocess.run(["python3", "-m", "iostack_rfm.jobs.gribcompare", "compare",
                              str(field), str(flipped), "--expect", "1"], env=with_defs,
                             capture_output=True, text=True)
    assert compare.returncode == 1
    assert "identical=0 differing=1" in compare.stdout
    assert ("gribcompare: RESULT=DIFFERENT reason=1 messages differ in bytes; grib_compare "
            "reports differences") in compare.stdout


def test_without_them_the_field_is_refused_in_one_line(work, field, environ):
    _, without = environ
    assert grib_ls(field, without) == [{"centre": CENTRE, "paramId": 0,
                                        "shortName": "unknown"}]
    p = gribdefs(field, without)
    assert p.returncode == 2
    assert p.stderr == ""
    assert p.stdout == (
        f"gribdefs: ERROR {field}: 1 of 1 messages hold a parameter no ecCodes definition "
        "names (message 0: GRIB2 centre eidb discipline 0 parameterCategory 1 "
        "parameterNumber 192 reads as paramId 0, shortName unknown); definitions searched: "
        "/usr/share/eccodes/definitions; the site's own definitions (sites/<site>.yaml "
        "grib_definitions) are not on ecCodes' path: load the site's ecCodes module\n")
    # why it is refused: FDB 5.10.8 itself takes the field, filed under param=0
    env = fdb(work, "without", without)
    subprocess.run(["fdb-write", str(field)], env=env, capture_output=True, check=True)
    listed = subprocess.run(["fdb-list", "--all", "--minimum-keys="], env=env,
                            capture_output=True, text=True, check=True).stdout
    assert "{step=6,param=0}" in listed


def test_a_declared_directory_missing_on_the_node_is_named_in_one_line(work, field, site):
    gone = dataclasses.replace(site, grib_definitions=(str(work / "not-installed"),
                                                       *site.grib_definitions))
    assert gone.missing_grib_definitions() == (
        f"site local: grib_definitions {work / 'not-installed'} is no directory on this node "
        "(sites/local.yaml grib_definitions): GRIB that needs them cannot be decoded here")
    assert site.missing_grib_definitions() is None
    (name, value), = config._grib_definitions(gone)
    env = {**os.environ, name: value.split("$")[0]}
    p = gribdefs(field, env)
    assert (p.returncode, p.stderr) == (2, "")
    assert p.stdout == (
        f"gribdefs: ERROR ECCODES_EXTRA_DEFINITION_PATH names {work / 'not-installed'}, no "
        "directory on this node: the site's grib_definitions (sites/<site>.yaml) are not "
        "installed here\n")


def test_the_facts_refuse_a_relative_directory_in_one_line(work):
    data = yaml.safe_load((site_facts.FACTS / "local.yaml").read_text())
    data["grib_definitions"] = ["site/definitions"]
    path = work / "relative" / "local.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(site_facts.FactsError) as e:
        site_facts.read(path)
    assert str(e.value) == (
        f"{path}: grib_definitions/0: 'site/definitions' is neither an absolute directory (a "
        "relative path means nothing on the nodes: give it from /) nor a Spack package's name")
