"""Find the pinned Spack and run it with the repository's configuration only.

Spack is found, in this order: the settings' SPACK_ROOT (with IOSTACK_SPACK_PACKAGES for
builtin), then the trees `iostack setup` cloned or unpacked in the cache directory. ~/.spack and /etc/spack
are never read (SPACK_DISABLE_LOCAL_CONFIG). Spack's own installation scopes
($SPACK_ROOT/etc/spack and its site/ directory) are read whatever the environment says, so a
Spack that carries configuration there (an auto-detected compiler, say) is refused: a
site's configuration is the repository's, plus the mirrors set-up registered.
"""
import hashlib
import os
import pathlib
import re
import shutil

from iostack.core import account, filesystems, paths, pins
from iostack.core.errors import Failed, IostackError
from iostack.core.process import capture, run
from iostack.core.settings import Settings
from iostack.site.target import SpackEnv, Target
from iostack.spack import config


class SpackMissing(IostackError):
    """No usable Spack: what is missing and how to provide it."""


class SpackForeignConfig(SpackMissing):
    """A Spack whose installation scopes hold settings that would change every site."""


def how_to_provide() -> str:
    return ("run `bin/iostack setup` where github.com is reachable, or, on an air-gapped node, "
            f"set SPACK_ROOT to a Spack {pins.SPACK_TAG} checkout and IOSTACK_SPACK_PACKAGES to "
            f"a spack-packages checkout at tag {pins.SPACK_PACKAGES_TAG}")


# What Spack itself ships in its installation scope; anything else there is a local setting.
SPACK_OWN_CONFIG = {"include.yaml", "README.md"}


def foreign_config(spack_root: pathlib.Path) -> list[pathlib.Path]:
    """Configuration files in Spack's installation scopes that Spack does not ship."""
    etc = spack_root / "etc" / "spack"
    found = [f for f in etc.glob("*.yaml") if f.name not in SPACK_OWN_CONFIG]
    site = etc / "site"
    found += [f for f in site.rglob("*") if f.is_file() and f.name not in SPACK_OWN_CONFIG]
    return sorted(found)


def locate(settings: Settings) -> tuple[pathlib.Path, pathlib.Path]:
    """(spack root, spack-packages checkout) or SpackMissing saying what is missing."""
    root, pkgs = settings.spack_tree, settings.packages_tree
    if not (root / "bin" / "spack").is_file():
        raise SpackMissing(f"Spack not found at {root}: {how_to_provide()}")
    if not (pkgs / "repos" / "spack_repo" / "builtin" / "repo.yaml").is_file():
        raise SpackMissing(f"spack-packages (builtin repo) not found at {pkgs}: {how_to_provide()}")
    foreign = foreign_config(root)
    if foreign:
        raise SpackForeignConfig(
            # the files' real paths: the cache's spack may be a link to the copy that has them
            f"Spack at {root} carries configuration of its own "
            f"({', '.join(str(f.resolve()) for f in foreign)}), "
            "which it reads whatever iostack says: iostack uses only the repository's "
            "configuration, so move it away (or point SPACK_ROOT at a clean Spack)")
    return root, pkgs


def misc_cache(settings: Settings, spack_root: pathlib.Path, pkgs: pathlib.Path) -> pathlib.Path:
    """Spack's misc cache (its repositories' provider, patch and tag indexes, detected
    compilers), shared by every deployment root this checkout deploys on this node: indexing
    spack-packages' recipes takes a minute of CPU, once, not once per root (it was most of a
    deploy from a build cache into a new root). Keyed by the repositories' paths: Spack
    trusts an index whose recipes are older than it, so checkouts must not share one."""
    key = hashlib.sha256("\0".join(map(str, (spack_root.resolve(), pkgs.resolve(),
                                              paths.REPO.resolve()))).encode()).hexdigest()
    misc = settings.state / "spack-misc" / key[:16]
    if not misc.exists():
        seed_builtin_indexes(misc, spack_root, pkgs)
    return misc


#: Spack's index kinds kept per repository in its misc cache (<kind>/<namespace>-...-index.json)
INDEX_KINDS = ("providers", "tags", "patches")
#: in each misc cache iostack makes: the Spack and spack-packages it indexes
MISC_SOURCES = "iostack-sources.json"


def seed_builtin_indexes(misc: pathlib.Path, spack_root: pathlib.Path, pkgs: pathlib.Path) -> None:
    """A new checkout's misc cache starts with the builtin repository's indexes from another
    of the same Spack and spack-packages: its recipes are the same files, older than those
    indexes, which Spack trusts; only iostack's repository, whose recipes are this
    checkout's, is indexed again (a copied checkout's first Spack call spent 100 CPU-s on
    builtin's). Done only by the directory's owner (root never makes the account's)."""
    import json

    parent = misc.parent
    sources = {"spack": str(spack_root.resolve()), "spack_packages": str(pkgs.resolve())}
    try:
        if not parent.is_dir() or parent.stat().st_uid != os.geteuid():
            return
        misc.mkdir()
        (misc / MISC_SOURCES).write_text(json.dumps(sources))
        for other in sorted(parent.iterdir()):
            try:
                if other == misc or json.loads((other / MISC_SOURCES).read_text()) != sources:
                    continue
            except (OSError, ValueError):
                continue
            for kind in INDEX_KINDS:
                for index in (other / kind).glob("builtin-*-index.json"):
                    (misc / kind).mkdir(exist_ok=True)
                    # its time too (Spack compares it); whole or not at all (this process
                    # made the directory, so nothing else writes here yet)
                    partial = misc / kind / f".{index.name}.seeding"
                    shutil.copy2(index, partial)
                    os.replace(partial, misc / kind / index.name)
            return
    except OSError:
        return      # Spack indexes everything itself, as without the seed


def environment(settings: Settings, root_dir: pathlib.Path,
                release: pathlib.Path | None = None) -> dict:
    """Variables every spack call gets; the site configs refer to the IOSTACK_* ones
    (iostack.core.settings.CHILD_VARIABLES says what each means). `release`: the release
    being built (its environment and module tree; see releases.py)."""
    spack_root, pkgs = locate(settings)
    venv_bin = settings.venv / "bin"
    return {
        "SPACK_ROOT": spack_root,
        # clingo comes from the venv, so Spack never tries to bootstrap it
        "SPACK_PYTHON": venv_bin / "python",
        "SPACK_DISABLE_LOCAL_CONFIG": "1",
        "SPACK_USER_CACHE_PATH": root_dir / "cache" / "user",
        "IOSTACK_SPACK_MISC_CACHE": misc_cache(settings, spack_root, pkgs),
        # build cache keys this node trusts (and signs with), outside the Spack tree
        "SPACK_GNUPGHOME": settings.key_ring,
        # spack-env/common/mirrors.yaml includes the mirrors set-up registered there
        "IOSTACK_SPACK_CONFIG": config.registered_mirrors_file(settings.cache).parent,
        "IOSTACK_ROOT": root_dir,
        "IOSTACK_RELEASE": release or root_dir,
        "IOSTACK_REPO": paths.REPO,
        "IOSTACK_SPACK_PACKAGES": pkgs,
    }


def deployed_env(env: SpackEnv, root_dir: pathlib.Path) -> pathlib.Path:
    """The site's environment as the deployment uses it: spack-env/ copied to <root>/spack-env,
    so what Spack writes (spack.lock, .spack-env/) stays with the deployment and never changes
    the checkout. Each call refreshes the copy from the checkout, keeping Spack's own state."""
    dest = paths.check_root(root_dir) / "spack-env"
    for path in sorted(dest.rglob("*"), reverse=True) if dest.exists() else []:
        if ".spack-env" in path.relative_to(dest).parts:
            continue
        if path.is_file() or path.is_symlink():
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    shutil.copytree(paths.REPO / "spack-env", dest, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns(".spack-env"))
    return dest / "sites" / env.name


def image_env(settings: Settings, env: SpackEnv, tree: pathlib.Path) -> pathlib.Path:
    """The environment of a release mounted read-only from its image, as it was built, in a
    copy of this node's: Spack writes into an environment it activates (its transaction
    lock, whatever config:locks says)."""
    built = tree / "spack-env"
    if not built.is_dir():
        raise Failed(f"{tree} is read-only and holds no Spack environment (spack-env/): give "
                     "the release mounted there, not its deployment root")
    copy = settings.state / "image-envs" / hashlib.sha256(str(built).encode()).hexdigest()[:16]
    shutil.copytree(built, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".spack-env"))
    return copy / "sites" / env.name


def spack_at(args, settings: Settings, root_dir: pathlib.Path,
             release: pathlib.Path | None = None, env: SpackEnv | None = None, **kw):
    """spack with the repository's configuration on the install tree of `root_dir`, in the
    environment `env` of `release` (else of the root) when given."""
    variables = environment(settings, root_dir, release)
    cmd: list[object] = [pathlib.Path(variables["SPACK_ROOT"]) / "bin" / "spack"]
    if env:
        tree = release or root_dir
        if filesystems.read_only(tree):
            # a release mounted from its image: Spack's file locks on its install database
            # fail ("Function not implemented"), and no command on it writes
            cmd += ["-c", "config:locks:false", "-e", image_env(settings, env, tree)]
        else:
            cmd += ["-e", deployed_env(env, tree)]
    return run(cmd + list(args), env_extra=variables, **kw)


def spack(args, target: Target, in_env: bool = True, **kw):
    """spack on the target's deployment, in its environment (as its release has it) unless
    `in_env` is false."""
    return spack_at(args, target.settings, target.root, target.release,
                    target.env if in_env else None, **kw)


# Spack's errors an admin meets when a mirror or a cache is wrong, and what they mean.
_STAGE = r"spack-stage-(\S+?)-[a-z0-9]{32}"
_EXPLAINED = [
    (re.compile(rf"All fetchers failed for {_STAGE}"),
     "the source of {0} is in none of the configured mirrors, and its upstream URL cannot "
     "be reached"),
    (re.compile(rf"sha256 checksum failed for \S*{_STAGE}.*?(?:URL = (\S+))?$", re.S),
     "the source archive of {0} ({1}) fails its sha256 checksum: the mirror's copy was "
     "changed or damaged"),
    # gpg says it before Spack's error, which only says no binary was found
    (re.compile(r"NoVerifyException|[Ff]ailed to verify|Can't check signature|BAD signature"),
     "the build cache is signed with a key this node does not trust: if you know the key, "
     "trust it (`bin/iostack spack -- gpg trust KEY.pub`), else do not use this cache"),
]


def error_line(stderr: str) -> str:
    """Spack's first error, on one line, explained where the meaning is known."""
    text = stderr.split("==> Error: ", 1)[1] if "==> Error: " in stderr else stderr
    for pattern, meaning in _EXPLAINED:
        m = pattern.search(stderr)
        if m:
            return meaning.format(*(g or "?" for g in m.groups()))
    lines = text.strip().splitlines()
    if not lines:
        return "no error message"
    # the error and its indented continuation (e.g. the command that failed), on one line
    first = [lines[0].strip()]
    for line in lines[1:]:
        if not line.startswith((" ", "\t")) or not line.strip():
            break
        first.append(line.strip())
    log = re.search(r"See build log for details:\s*(\S+)", text)
    return " ".join(first) + (f" (build log: {log.group(1)})" if log else "")


def checked(args, target: Target, what="spack", in_env: bool = True):
    """Run spack on the target; on failure, Failed with one line: what failed and Spack's
    reason."""
    proc = spack(args, target, in_env=in_env, check=False, capture_stderr=True)
    if proc.returncode != 0:
        raise Failed(f"{what} failed: {error_line(proc.stderr)}")
    return proc


def version(settings: Settings, spack_root: pathlib.Path) -> tuple[int, ...]:
    out = capture([spack_root / "bin" / "spack", "--version"],
                  env_extra={"SPACK_PYTHON": settings.python,
                             "SPACK_DISABLE_LOCAL_CONFIG": "1"}).stdout
    m = re.match(r"(\d+)\.(\d+)", out.strip())
    if not m:
        raise SpackMissing(f"{spack_root}/bin/spack --version printed {out!r}")
    return int(m.group(1)), int(m.group(2))


def spack_bin(settings: Settings) -> pathlib.Path:
    return locate(settings)[0] / "bin" / "spack"


def stop_gpg_agent(settings: Settings) -> None:
    """Stop the gpg-agent Spack's gpg calls start for its key ring (SPACK_GNUPGHOME): it
    would outlive the command as a daemon of the node nobody started on purpose."""
    gpgconf = shutil.which("gpgconf")
    if gpgconf:
        run([gpgconf, "--homedir", settings.key_ring, "--kill", "gpg-agent"], check=False)


def trust_key(settings: Settings, key: bytes, acct: account.Account | None = None) -> None:
    """Trust one armoured public key for build cache signatures (`spack gpg trust`), in the
    key ring of the settings' state; run as `acct`, whose ring it is, when root gives one."""
    import tempfile

    env = environment(settings, settings.scratch_spack_root)
    cmd = [spack_bin(settings), "gpg", "trust"]
    if acct is None:
        settings.key_ring.mkdir(parents=True, exist_ok=True, mode=0o700)
    with tempfile.TemporaryDirectory(prefix="iostack-key-") as tmp:
        public = pathlib.Path(tmp) / "release-key.asc"
        public.write_bytes(key)
        if acct is not None:
            # a public key, read by the account; the directory root's and private otherwise
            os.chmod(tmp, 0o755)
            public.chmod(0o644)
        try:
            run(cmd + [public] if acct is None else account.as_account(acct, cmd + [public]),
                env_extra={**env, **({"HOME": acct.home} if acct else {})})
        finally:
            if acct is None:
                stop_gpg_agent(settings)
            else:
                gpgconf = shutil.which("gpgconf")
                if gpgconf:
                    run(account.as_account(acct, [gpgconf, "--homedir", settings.key_ring,
                                                  "--kill", "gpg-agent"]), check=False)
