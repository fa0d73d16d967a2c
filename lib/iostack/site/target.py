"""What a command acts on, as two values the CLI builds once and passes down.

- `SpackEnv`: a site's Spack environment (spack-env/sites/<site>[/<env>]). A site and an
  environment are different types: `local` the site has the environments `local` (its
  default) and `local/nwp`; no function takes one under the other's name.
- `Target`: the site, its Spack environment, the deployment root, the release (built or
  tested), the ReFrame system, the state directory and the account jobs charge, with the settings of the command
  (iostack.core.settings). Everything below the CLI reads these from the Target, never
  from the process environment.
"""
from __future__ import annotations

import dataclasses
import pathlib

from iostack.core import paths
from iostack.core.settings import Settings

#: a release's copy of the lock it was built from (iostack.deployment.layout.LOCK)
LOCK = "spack.lock"


@dataclasses.dataclass(frozen=True, order=True)
class SpackEnv:
    site: str
    #: another environment of the site than its default (`nwp`), else None
    env: str | None = None

    @property
    def name(self) -> str:
        """As locks and `spack-env/sites/` name it: `local` or `local/nwp`."""
        return f"{self.site}/{self.env}" if self.env else self.site

    def __str__(self) -> str:
        return self.name

    @property
    def directory(self) -> pathlib.Path:
        """The checkout's environment directory (spack.yaml, the committed spack.lock)."""
        return paths.SPACK_ENV_SITES / self.name

    @property
    def committed_lock(self) -> pathlib.Path:
        return self.directory / LOCK

    @classmethod
    def parse(cls, name: str) -> SpackEnv:
        """`site` or `site/env` (unchecked: iostack.site.facts.check_spack_env checks)."""
        site, _, env = name.partition("/")
        return cls(site, env or None)


@dataclasses.dataclass(frozen=True)
class Target:
    settings: Settings
    env: SpackEnv
    #: the deployment root: releases/, current, opt/ (the install tree), reframe/results.db
    root: pathlib.Path
    #: the release this command builds or tests; None: the root itself (no releases)
    release: pathlib.Path | None = None
    #: the ReFrame system the regression runs on (default: the site's own)
    system: str | None = None
    #: where ReFrame writes (`nightly --state`); default <release>/reframe
    state: pathlib.Path | None = None
    #: the Slurm account the jobs charge (`--account`); default the site's facts'
    account: str | None = None

    @property
    def site(self) -> str:
        return self.env.site

    @property
    def reframe_system(self) -> str:
        return self.system or self.site

    @property
    def reframe_config(self) -> pathlib.Path:
        """ReFrame's configuration of the site's systems."""
        return paths.reframe_config(self.site)

    @property
    def tree(self) -> pathlib.Path:
        """The tree the command works in: the release, else the root."""
        return self.release or self.root

    @property
    def state_dir(self) -> pathlib.Path:
        """Where a regression on the tree writes its stage, output, perflogs and reports."""
        return self.state or self.tree / "reframe"

    @property
    def results_db(self) -> pathlib.Path:
        """Every release's regression sessions: RFM_SQLITE_DB_FILE (a root on a file system
        without reliable POSIX locks), else <state>/results.db for a moved state, else the
        deployment's <root>/reframe/results.db."""
        if self.settings.results_db:
            return self.settings.results_db
        if self.state:
            return self.state / "results.db"
        return self.root / "reframe" / "results.db"

    @property
    def lock(self) -> pathlib.Path:
        """The spack.lock the tree was built from: a release's own copy, else the checkout's."""
        if self.release is not None and (self.release / LOCK).is_file():
            return self.release / LOCK
        return self.env.committed_lock

    def with_release(self, release: pathlib.Path | None) -> Target:
        return dataclasses.replace(self, release=release)
