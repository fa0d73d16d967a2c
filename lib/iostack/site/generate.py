"""A site described once, generated into every tree that needs it.

`sites/<site>.yaml` (the facts) is the one description. From it, `bin/iostack site generate`
writes each file another tool reads, with a header naming its source, and CI regenerates
them and compares (tests/unit/test_site_generated.py): a change to the facts that is not
regenerated, or a hand edit of a generated file, fails there. What stays hand-written (a
site's further Spack externals, its inventory's own variables) lives in one named file beside
the generated ones, never in them.

Generated now:
- reframe-tests/config/<site>.py: ReFrame's configuration of the site's systems
  (iostack_rfm.config builds them from the facts when ReFrame loads it);
- every file of spack-env/sites/<site>/ and ansible/inventories/<site>/ that has a template
  beside it, `<file>.in` (packages.yaml.in, hosts.yml.in, group_vars/...): the template is
  the hand-written part (Spack's and Ansible's own structure, what the facts do not say),
  and every fact in it is a `[[ ... ]]` expression of the facts (`facts`, its
  programming environment `pe`, the filter `version`: `cce@16.0.1` -> `16.0.1`). Spack and
  Ansible read the generated file; neither reads a `.in` file. A Spack site's
  modules.yaml.in ends with `[[- eccodes_modules(facts) ]]`: the Lmod configuration by
  which ecCodes' module puts the site's own definitions (facts `grib_definitions`) on
  ecCodes' search path.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import pathlib

from iostack.core import paths
from iostack.site import facts as site_facts

#: what every generated file starts with: where it comes from and how to change it
HEADER = ("Generated from sites/{site}.yaml by `bin/iostack site generate {site}`: change the "
          "facts (or the named hand-written file beside this one), then generate again.")


class GenerateError(site_facts.FactsError):
    """A site that cannot be generated (its name would shadow a module), one line."""


@dataclasses.dataclass(frozen=True)
class Generated:
    path: pathlib.Path
    text: str

    @property
    def shown(self) -> str:
        return str(self.path.relative_to(paths.REPO))

    def current(self) -> bool:
        return self.path.is_file() and self.path.read_text() == self.text


def _comment(text: str, prefix: str = "# ") -> str:
    words, lines, line = text.split(), [], prefix.rstrip()
    for word in words:
        if len(line) + 1 + len(word) > 96:
            lines.append(line)
            line = prefix.rstrip()
        line += " " + word
    return "\n".join(lines + [line]) + "\n"


def reframe_config(site: str) -> Generated:
    """reframe-tests/config/<site>.py: the site's systems, built from its facts by
    iostack_rfm.config when ReFrame loads the file. ReFrame puts the file's directory first
    on sys.path while it imports it, so a site named like a module the configuration imports
    would shadow it: such a name is refused."""
    path = paths.reframe_config(site)
    if importlib.util.find_spec(path.stem) is not None:
        raise GenerateError(f"site {site!r}: reframe-tests/config/{site}.py would shadow the "
                            f"Python module {path.stem!r} while ReFrame loads it; choose "
                            "another name")
    facts = site_facts.load(site)
    text = (_comment(f"ReFrame configuration of site {site}: its systems "
                     f"{', '.join(facts.systems)}. " + HEADER.format(site=site))
            + "from iostack_rfm.config import site_configuration as _site_configuration\n\n"
            + f"site_configuration = _site_configuration({site!r})\n")
    return Generated(path, text)


#: where a site's templates are (each `<file>.in` makes `<file>`)
TEMPLATE_TREES = ("spack-env/sites/{site}", "ansible/inventories/{site}")


def _version(spec: str) -> str:
    """The version of a spec (`cce@16.0.1` -> `16.0.1`)."""
    return spec.split("@", 1)[1].split()[0]


#: ecCodes' variable of definition directories searched before its own (ecCodes 2.28 and
#: later: its context puts `<value>:<default path>`; ECCODES_DEFINITION_PATH would replace
#: the default instead)
EXTRA_DEFINITION_PATH = "ECCODES_EXTRA_DEFINITION_PATH"


def eccodes_modules(facts: site_facts.Site, indent: int = 6) -> str:
    """The Lmod modules configuration (YAML under `modules: default: lmod:`) that puts a
    site's own ecCodes definitions on the search path of every user of its ecCodes module:
    the module prepends the directories, in their order, and loads each package of
    definitions, whose own module prepends <prefix>/share/eccodes/definitions. Lmod runs a
    module's loads before its own settings, so the directories come before the packages'.
    Empty where the site declares none. Starts with a newline (the template strips the one
    before it)."""
    import yaml

    if not facts.grib_definitions:
        return ""
    config: dict = {}
    for package in facts.grib_definition_packages:
        config[package] = {"environment": {"prepend_path": {
            EXTRA_DEFINITION_PATH: "{prefix}/" + site_facts.PACKAGE_DEFINITIONS}}}
    eccodes: dict = {}
    if facts.grib_definition_packages:
        eccodes["load"] = list(facts.grib_definition_packages)
    if facts.grib_definition_dirs:
        eccodes["environment"] = {"prepend_path": {
            EXTRA_DEFINITION_PATH: ":".join(facts.grib_definition_dirs)}}
    config["eccodes"] = eccodes
    text = yaml.safe_dump(config, sort_keys=False, default_flow_style=False, width=100)
    pad = " " * indent
    comment = (f"{pad}# sites/{facts.name}.yaml grib_definitions: searched before ecCodes' "
               "own definitions\n")
    return "\n" + comment + "".join(pad + line for line in text.splitlines(keepends=True)
                                     ).rstrip("\n")


def _environment():
    import jinja2

    # [[ ]] and [% %]: the files are Spack's and Ansible's YAML, whose own `{{ }}` (Ansible's
    # Jinja) passes through untouched
    env = jinja2.Environment(variable_start_string="[[", variable_end_string="]]",
                             block_start_string="[%", block_end_string="%]",
                             comment_start_string="[#", comment_end_string="#]",
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["version"] = _version
    env.globals["eccodes_modules"] = eccodes_modules
    return env


def templates(site: str) -> list[pathlib.Path]:
    """The site's templates (`<file>.in`), in the trees that have them."""
    found: list[pathlib.Path] = []
    for tree in TEMPLATE_TREES:
        top = paths.REPO / tree.format(site=site)
        if top.is_dir():
            found += sorted(p for p in top.rglob("*.in") if p.is_file())
    return found


def from_template(site: str, template: pathlib.Path) -> Generated:
    """A file rendered from its template with the site's facts, under a header naming both."""
    import jinja2

    facts = site_facts.load(site)
    source = template.read_text()
    try:
        text = _environment().from_string(source).render(facts=facts,
                                                          pe=facts.programming_environment)
    except jinja2.TemplateError as e:
        raise GenerateError(f"{template.relative_to(paths.REPO)}: {e}") from None
    shown = template.relative_to(paths.REPO)
    header = _comment(HEADER.format(site=site).replace(
        "(or the named hand-written file beside this one)", f"or {shown}"))
    # YAML's document start stays the first line
    if text.startswith("---\n"):
        return Generated(template.with_suffix(""), "---\n" + header + text[4:])
    return Generated(template.with_suffix(""), header + text)


def generated(site: str) -> list[Generated]:
    """Every file generated from a site's facts."""
    return [reframe_config(site), *(from_template(site, t) for t in templates(site))]


def write(site: str) -> list[Generated]:
    """Write the site's generated files that differ; returns those written."""
    written = []
    for g in generated(site):
        if not g.current():
            g.path.parent.mkdir(parents=True, exist_ok=True)
            g.path.write_text(g.text)
            written.append(g)
    return written


def stale(site: str) -> list[Generated]:
    """The site's generated files that differ from what its facts give (or are missing)."""
    return [g for g in generated(site) if not g.current()]


def orphans() -> list[pathlib.Path]:
    """Generated files of sites that have no facts any more."""
    sites = set(site_facts.names())
    return sorted(p for p in (paths.REFRAME_DIR / "config").glob("*.py")
                  if p.stem not in sites)
