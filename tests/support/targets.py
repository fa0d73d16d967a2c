"""The values a test hands the library, as the CLI builds them (iostack.core.settings,
iostack.site.target): settings from this process's environment plus what the test says,
never set in os.environ."""
from __future__ import annotations

import os
import pathlib

from iostack.core.settings import Settings
from iostack.site.target import SpackEnv, Target


def settings(**env: str | os.PathLike) -> Settings:
    """Settings of this environment, with `env` (variable=value) on top."""
    return Settings.from_environ({**os.environ, **{k: str(v) for k, v in env.items()}})


def of(root: pathlib.Path, site: str = "local", env: str | None = None,
       system: str | None = None, release: pathlib.Path | None = None,
       state: pathlib.Path | None = None, account: str | None = None,
       settings_: Settings | None = None, **variables: str | os.PathLike) -> Target:
    """A Target on deployment root `root`, as `bin/iostack ... --site site --root root`."""
    return Target(settings_ or settings(**variables), SpackEnv(site, env), pathlib.Path(root),
                  release=release, system=system, state=state, account=account)
