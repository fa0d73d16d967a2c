"""The settings a command runs with, read once from the environment by the CLI
(`Settings.from_environ(os.environ)`) and passed down as a value. Below the CLI no module
reads configuration from os.environ, and none writes it: what a child process (Spack,
ReFrame, a job) needs is given to that process explicitly (`CHILD_VARIABLES`).

Each field comes from one variable, named in VARIABLES with its one meaning; README's
"Environment variables" table is that dictionary (tests/unit/test_settings.py keeps them
equal)."""
from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping

from iostack.core import paths

#: what a user may set for bin/iostack, each with its one meaning
VARIABLES = {
    "IOSTACK_ROOT": "the deployment root when --root is not given (default deploy/<site>)",
    "IOSTACK_CACHE": "where set-up keeps Spack, spack-packages, the mirrors and test roots "
                     "(default /var/cache/iostack for root and its service account, else "
                     "$XDG_CACHE_HOME/iostack, ~/.cache/iostack)",
    "IOSTACK_STATE": "what the account running Spack writes there: its key ring (the build "
                     "cache keys it trusts and signs with), Spack's misc cache and scratch "
                     "root (default the cache; for the service account, <cache>/accounts/"
                     "<account>)",
    "IOSTACK_USER": "the service account root runs builds, tests of builds and the regression "
                    "as (default iostack; iostack.core.account)",
    "IOSTACK_VENV": "the Python environment of the pinned tools (default <repo>/.venv)",
    "SPACK_ROOT": "a Spack checkout to use instead of the one set-up made",
    "IOSTACK_SPACK_PACKAGES": "a spack-packages checkout to use instead of set-up's",
    "IOSTACK_SPACK_BUNDLE": "the offline bundle set-up installs from (as --spack-bundle)",
    "IOSTACK_APT_LOCK_TIMEOUT": "seconds set-up waits for another apt to finish (default 120)",
    "IOSTACK_RFM_REFERENCES": "the performance references' directory (default "
                              "reframe-tests/references)",
    "IOSTACK_SAMPLES": "where published GRIB samples are unpacked (default <cache>/samples)",
    "RFM_SQLITE_DB_FILE": "ReFrame's own: the results DB, moved off a file system without "
                          "reliable POSIX locks (default <root>/reframe/results.db)",
    "LMOD_CMD": "Lmod's own: the Lmod the jobs and the spider cache use (default Debian's)",
}

#: what iostack gives the processes it starts (Spack, ReFrame and its jobs), each with its one
#: meaning; nothing else of iostack's is passed down
CHILD_VARIABLES = {
    "IOSTACK_REPO": "the repository the configuration and recipes come from (Spack's repos.yaml)",
    "IOSTACK_ROOT": "the deployment root: its install tree <root>/opt and Spack's caches",
    "IOSTACK_RELEASE": "the release being built (Spack) or tested (ReFrame): its environment, "
                       "module tree and spack.lock; the root itself where it has no releases",
    "IOSTACK_SITE": "the site the ReFrame checks run for (its facts, sites/<site>.yaml)",
    "IOSTACK_RFM_STATE": "where ReFrame writes its stage, output, perflogs and reports",
    "IOSTACK_RFM_REFERENCES": "the performance references the checks compare with",
    "IOSTACK_SAMPLES": "where the checks find the published GRIB samples",
    "IOSTACK_ACCOUNT": "the Slurm account the regression's jobs charge (--account, the facts')",
    "IOSTACK_DRAINED_NODES": "the nodes the health gate kept off the performance checks",
    "IOSTACK_SPACK_CONFIG": "the directory of the mirrors set-up registered (mirrors.yaml)",
    "IOSTACK_SPACK_MISC_CACHE": "Spack's misc cache, shared by the roots of this checkout",
    "IOSTACK_SPACK_PACKAGES": "the builtin repository's checkout (Spack's repos.yaml)",
}


#: root's cache (IOSTACK_CACHE unset): the node's, readable by its service account, whose
#: home (~root) is not
ROOT_CACHE = pathlib.Path("/var/cache/iostack")


def _name(uid: int) -> str | None:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None


def _path(value: str | None) -> pathlib.Path | None:
    return pathlib.Path(value) if value else None


@dataclasses.dataclass(frozen=True)
class Settings:
    cache: pathlib.Path
    venv: pathlib.Path
    #: what the account running Spack writes (IOSTACK_STATE; default the cache)
    state: pathlib.Path
    references: pathlib.Path
    samples: pathlib.Path
    root: pathlib.Path | None = None
    spack_root: pathlib.Path | None = None
    spack_packages: pathlib.Path | None = None
    spack_bundle: pathlib.Path | None = None
    apt_lock_timeout: int = 120
    results_db: pathlib.Path | None = None
    lmod_cmd: str | None = None
    #: the service account root builds and tests as (iostack.core.account)
    user: str = "iostack"
    #: the caller's MODULEPATH and PYTHONPATH, which the regression's jobs extend
    modulepath: str = ""
    pythonpath: str = ""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], uid: int | None = None) -> Settings:
        """The settings of `environ` for the user `uid` (default: this process's)."""
        def get(name: str) -> str | None:
            return environ.get(name) or None

        base = get("XDG_CACHE_HOME") or os.path.join(environ.get("HOME") or
                                                      os.path.expanduser("~"), ".cache")
        uid = os.geteuid() if uid is None else uid
        user = get("IOSTACK_USER") or "iostack"
        # root's is the node's, where its service account reads Spack and the mirrors; the
        # account run by hand (sudo -u iostack, su) finds the same, and its state where
        # root's bin/iostack gives it (iostack.core.account)
        service = uid != 0 and _name(uid) == user
        default = ROOT_CACHE if uid == 0 or service else pathlib.Path(base) / "iostack"
        cache = pathlib.Path(get("IOSTACK_CACHE") or default)
        state = get("IOSTACK_STATE") or (
            cache / "accounts" / user if service and not get("IOSTACK_CACHE") else cache)
        timeout = get("IOSTACK_APT_LOCK_TIMEOUT") or "120"
        db = get("RFM_SQLITE_DB_FILE")
        return cls(
            cache=cache,
            state=pathlib.Path(state),
            venv=pathlib.Path(get("IOSTACK_VENV") or paths.REPO / ".venv"),
            references=pathlib.Path(get("IOSTACK_RFM_REFERENCES")
                                    or paths.REFRAME_DIR / "references"),
            samples=pathlib.Path(get("IOSTACK_SAMPLES") or cache / "samples"),
            root=_path(get("IOSTACK_ROOT")),
            spack_root=_path(get("SPACK_ROOT")),
            spack_packages=_path(get("IOSTACK_SPACK_PACKAGES")),
            spack_bundle=_path(get("IOSTACK_SPACK_BUNDLE")),
            apt_lock_timeout=int(timeout) if timeout.isdigit() else 120,
            results_db=pathlib.Path(os.path.expandvars(db)) if db else None,
            lmod_cmd=get("LMOD_CMD"),
            user=user,
            modulepath=environ.get("MODULEPATH", ""),
            pythonpath=environ.get("PYTHONPATH", ""),
        )

    def replace(self, **changes) -> Settings:
        return dataclasses.replace(self, **changes)

    def deploy_root(self, site: str, given: str | os.PathLike | None = None) -> pathlib.Path:
        """A site's deployment root: --root, else IOSTACK_ROOT, else deploy/<site>; never a
        checkout (paths.check_root)."""
        if given:
            return paths.check_root(pathlib.Path(given).resolve())
        if self.root:
            return paths.check_root(self.root.resolve())
        return paths.REPO / "deploy" / site

    @property
    def python(self) -> pathlib.Path:
        return self.venv / "bin" / "python"

    @property
    def spack_tree(self) -> pathlib.Path:
        """The Spack checkout commands run: SPACK_ROOT, else set-up's."""
        return self.spack_root or self.cache / "spack"

    @property
    def packages_tree(self) -> pathlib.Path:
        """The spack-packages checkout (the builtin recipes): IOSTACK_SPACK_PACKAGES, else
        set-up's."""
        return self.spack_packages or self.cache / "spack-packages"

    @property
    def executed_trees(self) -> list[pathlib.Path]:
        """What a command runs code or keys from besides the checkout (iostack.core.trust)."""
        return [self.venv, self.spack_tree, self.packages_tree, self.key_ring]

    @property
    def key_ring(self) -> pathlib.Path:
        """Spack's GnuPG home: the build-cache keys the account running Spack trusts, and
        the one it signs with."""
        return self.state / "gpg"

    @property
    def scratch_spack_root(self) -> pathlib.Path:
        """The root of Spack commands that are about no deployment (keys, detection)."""
        return self.state / "spack-state"

    def account_state(self, account: str) -> pathlib.Path:
        """The state root gives its service account under its cache (the account's default
        where it runs by hand, with the cache unset)."""
        return self.cache / "accounts" / account
