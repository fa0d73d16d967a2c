"""A site described once, generated into every tree that needs it.

`sites/<site>.yaml` (the facts) is the one description. From it, `bin/iostack site generate`
writes each file another tool reads, with a header naming its source, and CI regenerates
them and compares (tests/unit/test_site_generated.py): a change to the facts that is not
regenerated, or a hand edit of a generated file, fails there. What stays hand-written (a
site's further Spack externals, its inventory's own variables) lives in one named file beside
the generated ones, never in them.

Generated now:
- reframe-tests/config/<site>.py: ReFrame's configuration of the site's systems
  (iostack_rfm.config builds them from the facts when ReFrame loads it).
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


def generated(site: str) -> list[Generated]:
    """Every file generated from a site's facts."""
    return [reframe_config(site)]


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
