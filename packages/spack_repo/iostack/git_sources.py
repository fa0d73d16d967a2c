"""Recipes whose sources are pinned to git commits (the version, and git resources), checked
by content wherever Spack takes them from: a clone, a mirror's tarball or the download cache.

A source fetched from a URL is checked against the sha256 its recipe records. A source
pinned to a commit and taken from a mirror has none: Spack warns ("Using a mirror instead of
version control ... Spack lacks a tree hash to verify the integrity of this archive") and
builds whatever the mirror holds under that commit's name. For the recipes here that is a
failure: each records, per commit, the content digest of the commit's tree
(`GIT_SOURCE_SHA256`, source_digest.py says how it is derived from the commit), and the
fetch fails unless what was fetched has it, or when a commit has none recorded.

    class Io500(GitSourcesPackage, MakefilePackage):
        version("2023.bb08c87", commit="bb08c873af21fad889838c5a4470868cb1294653")
        GIT_SOURCE_SHA256 = {"bb08c873af21fad889838c5a4470868cb1294653": "912d81..."}
"""
import spack.fetch_strategy as fs
import spack.llnl.util.tty as tty
from spack.package import PackageBase

from spack_repo.iostack import source_digest


class GitSourcesPackage(PackageBase):
    """Mixin: every git source of the recipe checked by content after it is fetched."""

    #: {full commit: content sha256 of its tree (source_digest.py)}
    GIT_SOURCE_SHA256: dict = {}

    def do_fetch(self, mirror_only=False):
        super().do_fetch(mirror_only)
        if not self.has_code or self.spec.external:
            return
        for stage in self.stage:
            if isinstance(stage.default_fetcher, fs.GitFetchStrategy):
                self.check_git_source(stage)

    def check_git_source(self, stage) -> None:
        pinned = stage.default_fetcher
        commit = pinned.commit
        expected = self.GIT_SOURCE_SHA256.get(commit)
        if not expected:
            raise fs.ChecksumError(
                f"{self.name}: no content sha256 recorded for its git source {pinned.url} at "
                f"{commit} (GIT_SOURCE_SHA256), so nothing checks what a mirror holds for it",
                "derive it from the commit: git archive --format=tar --prefix=src/ COMMIT | "
                "python3 spack_repo/iostack/source_digest.py -")
        if stage.fetcher is pinned:          # cloned: git itself checked out the commit
            where, found = pinned.url, source_digest.of_dir(stage.source_path)
        else:                                # a mirror's or the download cache's tarball
            where, found = stage.fetcher.url, source_digest.of_archive(stage.archive_file)
        if found != expected:
            raise fs.ChecksumError(
                f"{self.name}: the source of commit {commit[:12]} from {where} is not that "
                f"commit's: its content sha256 is {found}, the recipe records {expected}",
                "the mirror's copy was changed or damaged")
        tty.msg(f"{self.name}: {where}: the content of commit {commit[:12]} (sha256 {found[:16]})")
