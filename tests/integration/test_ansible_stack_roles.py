"""lmod, spack_stack and reframe_nightly roles on this node.

- lmod: the distribution's Lmod (already installed by set-up) finds a
  modulefile from <iostack_root>/current/modulefiles/Core through the profile
  script, and reads the release's spider cache through LMOD_RC.
- spack_stack: local git repositories tagged v1.1.0 / v2025.11.0 stand in
  for github.com/spack/{spack,spack-packages} (no network in CI), their commits standing
  in for the pinned ones; a stand-in bin/iostack records how deploy is called and as whom.
  With the real pins.json, the stand-ins are at the wrong commits and the role refuses them.
  The role runs iostack as a service account (a throwaway name, removed afterwards), so its
  files live in a directory of their own under /tmp that the account can reach (pytest's
  tmp_path is root's alone).
- reframe_nightly: units rendered to tmp_path, checked by systemd-analyze
  verify when it is usable, and parsed in any case; the service account (a throwaway
  name, removed afterwards) is created for real, and the sandbox scored by
  `systemd-analyze security --offline=yes`.
"""
from __future__ import annotations

import configparser
import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

from ansible_helpers import run_role  # noqa: E402

GIT = ["git", "-c", "user.name=iostack-test", "-c", "user.email=test@iostack.invalid",
       "-c", "init.defaultBranch=main", "-c", "advice.detachedHead=false"]


def head(path: pathlib.Path) -> str:
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def git_repo(path: pathlib.Path, files: dict[str, str], tag: str | None = None) -> pathlib.Path:
    path.mkdir(parents=True)
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
        if text.startswith("#!"):
            (path / name).chmod(0o755)
    subprocess.run([*GIT, "init", "-q", str(path)], check=True)
    subprocess.run([*GIT, "-C", str(path), "add", "-A"], check=True)
    subprocess.run([*GIT, "-C", str(path), "commit", "-q", "-m", "fixture"], check=True)
    if tag:
        subprocess.run([*GIT, "-C", str(path), "tag", tag], check=True)
    return path


FAKE_IOSTACK = """#!/bin/sh
# Stand-in for the repo's entry point: record the call (`mirror register` says whether it
# was asked the same before, as the real one says whether the file changed).
if [ "$1 $2" = "mirror register" ]; then
  if grep -qxF -- "$*" "$IOSTACK_TEST_LOG.args" 2>/dev/null; then echo unchanged; else echo written; fi
  printf '%s\\n' "$IOSTACK_CACHE" >> "$IOSTACK_TEST_LOG.cache"
fi
printf '%s\\n' "$*" >> "$IOSTACK_TEST_LOG.args"
printf '%s %s\\n' "$SPACK_ROOT" "$IOSTACK_SPACK_PACKAGES" >> "$IOSTACK_TEST_LOG.env"
# who runs it, and whether its git reads the (root's) checkout, as a release's commit needs
printf '%s %s %s\\n' "$1" "$(id -un)" "$(id -u)" >> "$IOSTACK_TEST_LOG.who"
if [ "$1" = deploy ]; then
  git -C "$(dirname "$0")" rev-parse HEAD >> "$IOSTACK_TEST_LOG.git" 2>&1
fi
"""


# --- lmod -------------------------------------------------------------------------

def test_lmod_puts_the_current_release_and_its_spider_cache_in_login_shells(venv_bin, tmp_path):
    """MODULEPATH names <root>/current/modulefiles/Core; LMOD_RC names an lmodrc.lua whose
    cache Lmod reads: a module added after the cache was written is missing from `module
    spider` with the cache and present without it."""
    from iostack.deployment import lmodcache

    init = pathlib.Path("/usr/share/lmod/lmod/init/bash")
    if not init.exists() or lmodcache.libexec() is None:
        pytest.skip("Lmod is not installed (apt package lmod)")
    root = tmp_path / "root"
    release = root / "releases" / "r1"
    (release / "modulefiles/Core/iostack-hello").mkdir(parents=True)
    (release / "modulefiles/Core/iostack-hello/1.0.lua").write_text('whatis("iostack test module")\n')
    (root / "current").symlink_to("releases/r1")
    lmodcache.generate(release, root / "current" / "modulefiles" / "Core")
    (release / "modulefiles/Core/iostack-late").mkdir()
    (release / "modulefiles/Core/iostack-late/1.0.lua").write_text('whatis("added after the cache")\n')
    script = tmp_path / "profile.d/iostack-modules.sh"
    rc_file = tmp_path / "etc-lmod/iostack-lmodrc.lua"
    role_vars = {"iostack_root": str(root), "lmod_profile_script": str(script),
                 "lmod_rc_file": str(rc_file)}

    first = run_role(venv_bin, "lmod", role_vars, tmp_path, gather=True)
    assert first.rc == 0, first.explain()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LMOD", "MODULE", "_ModuleTable"))}
    out = subprocess.run(["bash", "--norc", "--noprofile", "-c",
                          f"source {init} && source {script} && source {script} && "
                          "echo MODULEPATH=$MODULEPATH && echo LMOD_RC=$LMOD_RC && "
                          "module -t avail 2>&1 && echo SPIDER && module spider 2>&1 && "
                          "echo NOCACHE && LMOD_IGNORE_CACHE=1 module spider 2>&1"],
                         capture_output=True, text=True, check=True, env=env).stdout
    value = {line.split("=", 1)[0]: line.split("=", 1)[1] for line in out.splitlines()
             if line.startswith(("MODULEPATH=", "LMOD_RC="))}
    assert value["MODULEPATH"].split(":").count(str(root / "current/modulefiles/Core")) == 1
    assert value["LMOD_RC"].split(":").count(str(rc_file)) == 1
    listing, spider, nocache = out.split("\nSPIDER\n")[0], *out.split("\nSPIDER\n")[1].split("\nNOCACHE\n")
    assert "iostack-hello/1.0" in listing
    assert "iostack-hello" in spider and "iostack-late" not in spider  # read from the cache
    assert "iostack-hello" in nocache and "iostack-late" in nocache
    assert f'dir = "{root}/current/lmod/cache"' in rc_file.read_text()

    second = run_role(venv_bin, "lmod", role_vars, tmp_path, gather=True)
    assert second.rc == 0, second.explain()
    assert second.changed == 0, second.changed_tasks()



@pytest.mark.parametrize("facts,plan", [
    ({"os_family": "RedHat", "distribution": "OracleLinux", "distribution_major_version": "8",
      "pkg_mgr": "dnf"},
     "lmod: would install Lmod from repository ol8_developer_EPEL with the dnf module"),
    ({"os_family": "RedHat", "distribution": "Rocky", "distribution_major_version": "8",
      "pkg_mgr": "dnf"},
     "lmod: would install Lmod from repository epel with the dnf module"),
    ({"os_family": "Suse", "distribution": "SLES", "distribution_major_version": "15",
      "pkg_mgr": "zypper"},
     "lmod: would install lua-lmod with the zypper module"),
    ({"os_family": "Debian", "distribution": "Debian", "distribution_major_version": "12",
      "pkg_mgr": "apt"},
     "lmod: would install lmod with the apt module"),
])
def test_lmod_installs_each_distributions_own_package(venv_bin, tmp_path, facts, plan):
    """Oracle Linux 8's Lmod is EPEL's, from Oracle's mirror of it (ol8_developer_EPEL, as
    Oracle's stack enables it [OCI-HPC-Stack]); SLES's is lua-lmod. Planned in check mode with
    the OS's facts given."""
    role_vars = {"iostack_root": str(tmp_path / "root"), "ansible_facts": facts,
                 "lmod_profile_script": str(tmp_path / "profile.d/iostack-modules.sh"),
                 "lmod_rc_file": str(tmp_path / "etc-lmod/iostack-lmodrc.lua")}
    run = run_role(venv_bin, "lmod", role_vars, tmp_path, check=True)
    assert run.rc == 0, run.explain()
    assert plan in run.messages()
    assert not (tmp_path / "profile.d").exists()


def test_lmod_refuses_a_distribution_it_has_no_package_for(venv_bin, tmp_path):
    run = run_role(venv_bin, "lmod", {"ansible_facts": {"os_family": "Archlinux",
                                                        "distribution": "Archlinux"}},
                   tmp_path, check=True)
    assert run.rc != 0
    assert ("lmod: no Lmod package known for Archlinux (Archlinux); add it to lmod_packages, "
            "or install Lmod yourself and set lmod_install to false.") in run.messages()


# --- spack_stack ------------------------------------------------------------------

@pytest.fixture
def service_account(tmp_path):
    """A throwaway name for the account the role creates, removed (with its group) afterwards."""
    name = f"iostack-t{os.getpid()}"
    yield name
    subprocess.run(["userdel", name], capture_output=True)
    subprocess.run(["groupdel", name], capture_output=True)


@pytest.fixture
def shared_dir():
    """A directory the service account can reach (tmp_path is under root's 0700
    /tmp/pytest-of-root), with a log directory it may write; removed afterwards."""
    path = pathlib.Path(tempfile.mkdtemp(prefix="iostack-svc-", dir="/tmp"))
    path.chmod(0o755)
    (path / "log").mkdir()
    (path / "log").chmod(0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def stack_sources(shared_dir, service_account):
    if not shutil.which("git"):
        pytest.skip("git not installed")
    spack = git_repo(shared_dir / "src/spack", {"etc/spack/defaults/config.yaml": "config: {}\n",
                                                "bin/spack": "#!/bin/sh\n"}, tag="v1.1.0")
    packages = git_repo(shared_dir / "src/spack-packages", {"repos/spack_repo/builtin/repo.yaml": "repo: {}\n"},
                        tag="v2025.11.0")
    iostack = git_repo(shared_dir / "src/iostack", {"bin/iostack": FAKE_IOSTACK})
    root = shared_dir / "root"
    root.mkdir()
    return {
        "iostack_root": str(root), "iostack_site": "local", "iostack_repo_dir": str(iostack),
        "spack_stack_spack_url": f"file://{spack}", "spack_stack_packages_url": f"file://{packages}",
        "spack_stack_spack_commit": head(spack), "spack_stack_packages_commit": head(packages),
        "spack_stack_buildcache": {"name": "site-cache", "url": "file:///srv/buildcache", "signed": False},
        "spack_stack_mirrors": [{"name": "sources", "url": "https://mirror.example.org/spack"}],
        "spack_stack_user": service_account, "spack_stack_home": str(shared_dir / "home"),
        # the tasks the account runs need a Python it can reach: the node's, not the venv of
        # a checkout that may sit in a directory only root can enter (CI's fresh clone does)
        "ansible_python_interpreter": "/usr/bin/python3",
    }


def tree_state(path: pathlib.Path) -> dict:
    """Every entry under path: type, owner, mode, size and mtime (what a write would change)."""
    out = {}
    for entry in [path, *sorted(path.rglob("*"))]:
        st = entry.lstat()
        out[str(entry)] = (st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns)
    return out


def as_account(name: str, script: str) -> int:
    """Exit status of a shell command run as the (nologin) account."""
    return subprocess.run(["su", "-s", "/bin/sh", name, "-c", script], capture_output=True).returncode


def test_spack_stack_clones_pins_configures_and_deploys_once_as_the_account(
        stack_sources, shared_dir, service_account, venv_bin, tmp_path, monkeypatch):
    """Root clones the checkouts and keeps them; mirror register, deploy and releases run as
    the service account, which owns the stack root and the cache; a checkout the account
    could have replaced (not root's) is refused."""
    import pwd

    log = shared_dir / "log" / "deploy"
    monkeypatch.setenv("IOSTACK_TEST_LOG", str(log))
    root = pathlib.Path(stack_sources["iostack_root"])
    # what a deploy as root (before the account) left: handed over, unlike the code root runs
    (root / "releases/r0").mkdir(parents=True)
    (root / "releases/r0/release.json").write_text("{}\n")
    (root / "iostack-cache/gpg").mkdir(parents=True)
    (root / "iostack-cache/gpg/trustdb.gpg").write_text("")

    before = tree_state(shared_dir)
    plan = run_role(venv_bin, "spack_stack", stack_sources, tmp_path, check=True)
    assert plan.rc == 0, plan.explain()
    assert f"would clone {stack_sources['spack_stack_spack_url']} at v1.1.0" in plan.messages()
    assert f"deploy --site local --root {root} (as {service_account})" in plan.messages()
    # check mode: no account, no checkout, no call, no file or owner changed
    assert subprocess.run(["getent", "passwd", service_account], capture_output=True).returncode == 2
    assert tree_state(shared_dir) == before

    first = run_role(venv_bin, "spack_stack", stack_sources, tmp_path)
    assert first.rc == 0, first.explain()
    account = pwd.getpwnam(service_account)
    assert account.pw_uid != 0 and account.pw_shell == "/usr/sbin/nologin"
    for sub, tag in (("spack", "v1.1.0"), ("spack-packages", "v2025.11.0")):
        described = subprocess.run(["git", "-C", str(root / sub), "describe", "--tags", "--exact-match"],
                                   capture_output=True, text=True, check=True).stdout.strip()
        assert described == tag
    # never in the Spack tree, whose own configuration iostack refuses
    assert not (root / "spack/etc/spack/mirrors.yaml").exists()
    # iostack writes the mirrors file (tests/unit/test_cli.py: what it writes), for this cache
    register = ("mirror register --source=sources=https://mirror.example.org/spack "
                "--buildcache=site-cache=file:///srv/buildcache --unsigned")
    assert log.with_suffix(".args").read_text().splitlines() == [
        register, f"deploy --site local --root {root}", f"releases --site local --root {root}"]
    assert log.with_suffix(".cache").read_text().split() == [str(root / "iostack-cache")]
    assert log.with_suffix(".env").read_text().split()[:2] == [str(root / "spack"), str(root / "spack-packages")]
    # [issue 33] each ran as the account, not root
    assert log.with_suffix(".who").read_text().splitlines() == [
        f"{call} {service_account} {account.pw_uid}" for call in ("mirror", "deploy", "releases")]
    # and its git reads root's checkout (a release names its commit, not "unknown")
    assert log.with_suffix(".git").read_text().split() == [head(pathlib.Path(stack_sources["iostack_repo_dir"]))]
    # the account owns what it writes, and what root left there before
    for path in (root, root / "iostack-cache", root / "iostack-cache/spack-config", root / ".iostack-deploy-stamp",
                 root / "releases/r0/release.json", root / "iostack-cache/gpg/trustdb.gpg"):
        assert path.lstat().st_uid == account.pw_uid, path
    # root keeps the code: every file of the checkouts its, none writable by the account
    for sub in ("spack", "spack-packages"):
        for path in [root / sub, *(root / sub).rglob("*")]:
            st = path.lstat()
            assert st.st_uid == 0 and not st.st_mode & 0o022, (path, oct(st.st_mode))
        assert as_account(service_account, f"test -r {root / sub}/.git/HEAD") == 0
        assert as_account(service_account, f"touch {root / sub}/bin/x || touch {root / sub}/x") != 0
    assert not (root / "spack/bin/x").exists()

    second = run_role(venv_bin, "spack_stack", stack_sources, tmp_path)
    assert second.rc == 0, second.explain()
    assert second.changed == 0, second.changed_tasks()
    calls = log.with_suffix(".args").read_text().splitlines()
    assert [c for c in calls if c.startswith("deploy")] == [f"deploy --site local --root {root}"]
    assert "up to date, not running" in second.messages()

    third = run_role(venv_bin, "spack_stack", {**stack_sources, "spack_stack_switch": False,
                                               "spack_stack_force_deploy": True}, tmp_path)
    assert third.rc == 0, third.explain()
    calls = log.with_suffix(".args").read_text().splitlines()
    assert calls[-2] == f"deploy --site local --root {root} --no-switch"

    # the account owns the stack root: it could swap a checkout for its own, for root's git
    # (clone, fetch) to run in. One not root's is refused before anything runs.
    subprocess.run(["chown", "-R", f"{service_account}:", str(root / "spack")], check=True)
    calls = log.with_suffix(".args").read_text()
    fourth = run_role(venv_bin, "spack_stack", {**stack_sources, "spack_stack_force_deploy": True}, tmp_path)
    assert fourth.rc != 0
    assert f"{root / 'spack'} is owned by {service_account}, not root: remove it" in fourth.messages()
    assert log.with_suffix(".args").read_text() == calls


def test_spack_stack_refuses_root_as_the_account_before_writing(stack_sources, shared_dir, venv_bin,
                                                                tmp_path, monkeypatch):
    """[issue 33] spack_stack_user root (the old behaviour) is refused in one line, first:
    no account, clone, directory or call."""
    log = shared_dir / "log" / "deploy"
    monkeypatch.setenv("IOSTACK_TEST_LOG", str(log))
    etc = {f: pathlib.Path(f).read_bytes() for f in ("/etc/passwd", "/etc/group")}
    before = tree_state(shared_dir)
    for user in ("root", "Robert'); rm -rf /"):
        refused = run_role(venv_bin, "spack_stack", {**stack_sources, "spack_stack_user": user}, tmp_path)
        assert refused.rc != 0
        failed = [name for name, res in refused.results() if res.get("failed")]
        assert failed == ["spack_stack : Check the account"], refused.explain()
        assert (f"spack_stack: Spack builds, their tests and the regression run as an unprivileged account "
                f"(spack_stack_user '{user}', group '{user}', uid unset): not root, not 0, a lower-case name"
                ) in refused.messages().splitlines()
        assert tree_state(shared_dir) == before
        assert {f: pathlib.Path(f).read_bytes() for f in etc} == etc


def test_spack_stack_refuses_a_checkout_that_is_not_the_pinned_commit(stack_sources, shared_dir, venv_bin,
                                                                      tmp_path, monkeypatch):
    """The stand-ins carry the pinned tags but not the commits of pins.json: refused, both
    when cloning and when a checkout is already there, before deploy runs."""
    log = shared_dir / "log" / "deploy"
    monkeypatch.setenv("IOSTACK_TEST_LOG", str(log))
    pinned = {k: v for k, v in stack_sources.items() if not k.endswith("_commit")}
    pins = json.loads((pathlib.Path(__file__).parents[2] / "pins.json").read_text())
    first = run_role(venv_bin, "spack_stack", pinned, tmp_path)
    assert first.rc != 0
    assert f"not the pinned {pins['spack']['commit'][:12]} of pins.json" in first.explain()
    assert not log.with_suffix(".args").exists()
    # now present at the wrong commit: refused before anything else, in check mode too
    plan = run_role(venv_bin, "spack_stack", pinned, tmp_path, check=True)
    assert plan.rc != 0
    assert "refused" in plan.messages() and "remove it, or bump pins.json" in plan.explain()


# --- reframe_nightly ----------------------------------------------------------------

#: `systemd-analyze security --offline=yes` of the unit (systemd 252): 9.6 UNSAFE as root
#: without the sandbox, 3.4 OK with it (3.1 before the user, UTS and PID namespaces the counts
#: make were allowed); as the account without the sandbox lines 9.2 UNSAFE
EXPOSURE_BOUND = 3.5
#: what the unit must set (issue 33), each as written
SANDBOX = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes",
           "PrivateDevices": "yes", "ProtectKernelTunables": "yes", "ProtectKernelModules": "yes",
           "ProtectKernelLogs": "yes", "ProtectControlGroups": "yes", "RestrictSUIDSGID": "yes",
           "LockPersonality": "yes", "RestrictRealtime": "yes",
           # what counts.isolated() makes, no more (test_the_unit_lets_the_counts_isolate)
           "RestrictNamespaces": "user uts pid",
           "SystemCallArchitectures": "native", "CapabilityBoundingSet": "", "UMask": "0027"}


def test_the_unit_lets_the_counts_isolate():
    """The unit allows exactly the namespaces WorkCountsCheck's counting makes as the
    account (unshare's flags in iostack.regression.counts.isolated), else the nightly's
    counts fail under the timer that runs them."""
    from iostack.regression import counts

    flags = {"--user": "user", "--uts": "uts", "--pid": "pid", "--mount": "mnt",
             "--net": "net", "--ipc": "ipc", "--cgroup": "cgroup", "--time": "time"}
    made = {flags[f] for f in counts.isolated(["true"], uid=999)[1:] if f in flags}
    assert made == set(SANDBOX["RestrictNamespaces"].split()) == {"user", "uts", "pid"}


def unit_settings(path: pathlib.Path) -> dict[str, list[str]]:
    """{key: [values]} of a unit's [Service] section, repeated keys (Environment=) kept."""
    out: dict[str, list[str]] = {}
    section = None
    for line in path.read_text().splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "Service" and "=" in line and not line.startswith("#"):
            key, value = line.split("=", 1)
            out.setdefault(key, []).append(value)
    return out


def exposure(unit: pathlib.Path) -> tuple[float, str]:
    res = subprocess.run(["systemd-analyze", "security", "--offline=yes", str(unit)],
                         capture_output=True, text=True, env={**os.environ, "SYSTEMD_LOG_LEVEL": "err"})
    assert res.returncode == 0, res.stdout + res.stderr
    level = res.stdout.strip().splitlines()[-1].split(": ", 1)[1].split()
    return float(level[0]), level[1]


def can_score() -> bool:
    analyze = shutil.which("systemd-analyze")
    return bool(analyze) and subprocess.run([analyze, "security", "--help"], capture_output=True,
                                            text=True).stdout.count("--offline") > 0


def test_reframe_nightly_units_render_and_verify(venv_bin, tmp_path, service_account):
    repo = git_repo(tmp_path / "iostack", {"bin/iostack": FAKE_IOSTACK})
    units, tmpfiles, reports = tmp_path / "units", tmp_path / "tmpfiles.d", tmp_path / "reports"
    role_vars = {"iostack_root": str(tmp_path / "root"), "iostack_site": "cray-ex", "iostack_repo_dir": str(repo),
                 "iostack_account": "x01",
                 "reframe_nightly_unit_dir": str(units), "reframe_nightly_tmpfiles_dir": str(tmpfiles),
                 "reframe_nightly_report_dir": str(reports), "reframe_nightly_retention_days": 14,
                 "reframe_nightly_user": service_account, "reframe_nightly_home": str(tmp_path / "home")}
    first = run_role(venv_bin, "reframe_nightly", role_vars, tmp_path)
    assert first.rc == 0, first.explain()

    service, timer = units / "iostack-nightly.service", units / "iostack-nightly.timer"
    svc = configparser.ConfigParser(strict=False, interpolation=None)
    svc.read(service)
    # the site's budget: ARCHER2 refuses a job without one [ARCHER2-Scheduler]
    assert svc["Service"]["ExecStart"] == f"{repo}/bin/iostack nightly --site cray-ex --account x01"
    root = tmp_path / "root"
    settings = unit_settings(service)
    # the deploy's stack, Spack and cache (spack_stack's defaults), whose key ring is <cache>/gpg
    assert settings["Environment"] == [f"IOSTACK_ROOT={root}", f"IOSTACK_CACHE={root}/iostack-cache",
                                       f"SPACK_ROOT={root}/spack", f"IOSTACK_SPACK_PACKAGES={root}/spack-packages"]
    assert settings["User"] == [service_account] and settings["Group"] == [service_account]
    assert {k: settings.get(k) for k in SANDBOX} == {k: [v] for k, v in SANDBOX.items()}
    assert settings["ProtectHome"] == ["yes"]
    assert "IPAddressDeny" not in settings and "SystemCallFilter" not in settings
    assert settings["RestrictAddressFamilies"] == ["AF_UNIX AF_INET AF_INET6 AF_NETLINK"]
    # exactly what the nightly writes: the results DB and runs, the reports, Spack's caches,
    # the current release's state
    assert settings["ReadWritePaths"] == [" ".join([
        f"{root}/reframe", str(reports), f"{root}/cache/user", f"{root}/spack-env",
        f"{root}/iostack-cache/spack-misc", f"-{root}/current/reframe"])]
    # a system account without a login shell, owning what the nightly writes
    import grp
    import pwd
    account = pwd.getpwnam(service_account)
    assert account.pw_shell == "/usr/sbin/nologin" and account.pw_dir == str(tmp_path / "home")
    assert 0 < account.pw_uid < 1000 and grp.getgrgid(account.pw_gid).gr_name == service_account
    assert not list((tmp_path / "home").iterdir())   # no /etc/skel shell files
    for path in (root / "reframe", reports, root / "cache/user", root / "spack-env", root / "iostack-cache/spack-misc"):
        assert path.stat().st_uid == account.pw_uid, path
    if can_score():
        score, rating = exposure(service)
        assert score <= EXPOSURE_BOUND, (score, rating)
    assert svc["Service"]["Type"] == "oneshot"
    tim = configparser.ConfigParser(strict=False, interpolation=None)
    tim.read(timer)
    assert tim["Timer"]["Unit"] == "iostack-nightly.service"
    assert tim["Timer"]["Persistent"] == "true"
    assert tim["Install"]["WantedBy"] == "timers.target"
    rules = [line for line in (tmpfiles / "iostack-nightly.conf").read_text().splitlines()
             if line and not line.startswith("#")]
    assert rules == [f"d {reports} 0750 {service_account} {service_account} 14d",
                     f"e {tmp_path / 'root'}/releases/*/reframe/reports - - - 14d"]
    tmpfiles_tool = shutil.which("systemd-tmpfiles")
    if tmpfiles_tool:   # the rules parse (a syntax error exits 65); they name only tmp_path
        res = subprocess.run([tmpfiles_tool, "--clean", str(tmpfiles / "iostack-nightly.conf")],
                             capture_output=True, text=True)
        assert res.returncode == 0 and res.stderr == "", res.stderr
    assert reports.is_dir()

    analyze = shutil.which("systemd-analyze")
    if analyze:
        res = subprocess.run([analyze, "verify", str(service), str(timer)], capture_output=True, text=True,
                             env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"})
        assert res.returncode == 0, res.stdout + res.stderr

    second = run_role(venv_bin, "reframe_nightly", role_vars, tmp_path)
    assert second.rc == 0, second.explain()
    assert second.changed == 0, second.changed_tasks()
    # a site that names no account: none on the command line (the facts' is used)
    del role_vars["iostack_account"]
    third = run_role(venv_bin, "reframe_nightly", role_vars, tmp_path)
    assert third.rc == 0, third.explain()
    svc.read(service)
    assert svc["Service"]["ExecStart"] == f"{repo}/bin/iostack nightly --site cray-ex"
    # a checkout under /home stays readable: ProtectHome=read-only, not yes
    fourth = run_role(venv_bin, "reframe_nightly", {**role_vars, "iostack_repo_dir": "/home/ops/iostack"}, tmp_path)
    assert fourth.rc == 0, fourth.explain()
    assert unit_settings(service)["ProtectHome"] == ["read-only"]
    # a root on Lustre or NFS: the results DB on the host's own disk, and the unit may write there
    db = tmp_path / "local" / "reframe" / "results.db"
    fifth = run_role(venv_bin, "reframe_nightly", {**role_vars, "reframe_nightly_results_db": str(db)},
                     tmp_path)
    assert fifth.rc == 0, fifth.explain()
    settings = unit_settings(service)
    assert settings["Environment"][-1] == f"RFM_SQLITE_DB_FILE={db}"
    assert settings["ReadWritePaths"][0].split()[-2] == str(db.parent)
    assert db.parent.stat().st_uid == account.pw_uid


def test_reframe_nightly_check_mode_writes_nothing_and_root_is_refused(venv_bin, tmp_path, service_account):
    """--check plans the account and the units and creates neither; an account of root (the
    old default) is refused before anything is written."""
    role_vars = {"iostack_root": str(tmp_path / "root"), "iostack_site": "cray-ex",
                 "iostack_repo_dir": str(tmp_path / "iostack"), "reframe_nightly_user": service_account,
                 "reframe_nightly_home": str(tmp_path / "home"),
                 "reframe_nightly_unit_dir": str(tmp_path / "units"),
                 "reframe_nightly_tmpfiles_dir": str(tmp_path / "tmpfiles.d")}
    plan = run_role(venv_bin, "reframe_nightly", role_vars, tmp_path, check=True)
    assert plan.rc == 0, plan.explain()
    assert f"as {service_account}, sandboxed, writing only {tmp_path / 'root'}/reframe," in plan.messages()
    assert subprocess.run(["getent", "passwd", service_account], capture_output=True).returncode == 2
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("vars-")) == []

    refused = run_role(venv_bin, "reframe_nightly", {**role_vars, "reframe_nightly_user": "root"}, tmp_path)
    assert refused.rc != 0
    assert "the nightly runs as an unprivileged account (reframe_nightly_user 'root'" in refused.messages()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("vars-")) == []
