"""Releases under real Lmod: jobs loading modules from `current` while it is switched back
and forth, and the spider cache each release carries (lib/iostack/deployment/releases.py,
lib/iostack/deployment/lmodcache.py). Trees are generated like Spack's (Core / compiler / MPI, the
lower levels unlocked by absolute release paths); the spack tier deploys real ones."""
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from iostack.deployment import lmodcache, releases
from iostack_testbed import lmodbench

LMOD_INIT = "/usr/share/lmod/lmod/init/bash"
pytestmark = pytest.mark.skipif(lmodcache.libexec() is None or not os.path.exists(LMOD_INIT),
                                reason="Lmod not installed (apt: lmod)")


def clean_env(**extra):
    without = set(lmodcache.lmod_variables())
    return {**{k: v for k, v in os.environ.items() if k not in without}, **extra}


def make_release(root: pathlib.Path, rid: str, modules: int = 60) -> pathlib.Path:
    """A passed release: a generated hierarchy plus `tool`, whose program prints the
    release id, and its spider cache as deploy writes it."""
    path = root / "releases" / rid
    lmodbench.synthetic_tree(path / "modulefiles", modules)
    (path / "bin").mkdir(parents=True)
    tool = path / "bin" / "tool"
    tool.write_text(f"#!/bin/sh\necho {rid}\n")
    tool.chmod(0o755)
    (path / "modulefiles" / "Core" / "tool").mkdir()
    (path / "modulefiles" / "Core" / "tool" / "1.0.lua").write_text(
        f'prepend_path("PATH", "{path / "bin"}")\n')
    lmodcache.generate(path, root / "current" / "modulefiles" / "Core")
    lmodcache.present_as(path, root / "current" / "modulefiles" / "Core")
    (path / "release.json").write_text(json.dumps({
        "id": rid, "regression": releases.PASSED, "created": rid[:15], "site": "local",
        "modulefiles_sha256": releases.tree_digest(path / "modulefiles")}))
    return path


def lmod(args, root, **env):
    """Lmod's own command (what `module` evals); its listing goes to stderr."""
    cmd = [str(lmodcache.libexec() / "lmod"), "bash", *args]
    env = clean_env(MODULEPATH=str(root / "current" / "modulefiles" / "Core"),
                    HOME=str(root / "home"), TERM="dumb", **env)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, check=True).stderr


def test_a_release_spider_cache_is_what_a_walk_through_current_gives(tmp_path):
    rel = make_release(tmp_path, "20250101T000000Z-aaaa-1111", modules=200)
    releases.switch(tmp_path, rel.name)
    walked = subprocess.run([str(lmodcache.libexec() / "spider"), "-o", "spiderT",
                             str(tmp_path / "current" / "modulefiles" / "Core")],
                            capture_output=True, text=True, check=True, env=clean_env()).stdout
    cached = (rel / "lmod" / "cache" / "spiderT.lua").read_text()
    assert cached == walked
    assert str(rel / "modulefiles" / "gcc") in cached  # lower levels: the release's own paths
    assert f'"{rel}/modulefiles/Core' not in cached


def test_module_files_name_core_as_users_do_so_lmod_can_walk_the_tree(tmp_path):
    """Spack's core-compiler module unlocks Core by the release's path; walked through
    `current`, Lmod 8.6 overflows its stack on the two spellings unless the files say
    `current` too."""
    rel = make_release(tmp_path, "20250101T000000Z-aaaa-1111")
    releases.switch(tmp_path, rel.name)
    gcc = rel / "modulefiles" / "Core" / "gcc" / "12.2.0.lua"
    assert f'"{tmp_path}/current/modulefiles/Core"' in gcc.read_text()
    (tmp_path / "home").mkdir()
    assert "tool0000" in lmod(["spider"], tmp_path, LMOD_IGNORE_CACHE="1")
    # what deploy had written without present_as
    gcc.write_text(gcc.read_text().replace(f"{tmp_path}/current/", f"{rel}/"))
    with pytest.raises(subprocess.CalledProcessError) as e:
        lmod(["spider"], tmp_path, LMOD_IGNORE_CACHE="1")
    assert "stack overflow" in e.value.stderr


def test_lmod_reads_the_cache_and_lists_the_same_modules_as_a_walk(tmp_path):
    rel = make_release(tmp_path, "20250101T000000Z-aaaa-1111")
    releases.switch(tmp_path, rel.name)
    rc = tmp_path / "lmodrc.lua"
    rc.write_text(lmodcache.rc_text(tmp_path / "current" / "lmod" / "cache",
                                    tmp_path / "current" / "lmod" / "timestamp"))
    (tmp_path / "home").mkdir()
    for sub in ("avail", "spider"):
        assert lmod([sub], tmp_path, LMOD_RC=str(rc)) == lmod([sub], tmp_path, LMOD_IGNORE_CACHE="1")
    assert "plib0000" in lmod(["spider"], tmp_path, LMOD_RC=str(rc))  # the MPI level is in it
    # the cache, not a walk, answers: a module written after it is not listed with it
    late = rel / "modulefiles" / "Core" / "late" / "1.0.lua"
    late.parent.mkdir()
    late.write_text('whatis("late")\n')
    assert "late" not in lmod(["spider"], tmp_path, LMOD_RC=str(rc))
    assert "late" in lmod(["spider"], tmp_path, LMOD_IGNORE_CACHE="1")


JOB = """source {init}
module use {root}/current/modulefiles/Core
while [ ! -e {stop} ]; do
    out=$( (module purge && module load tool && tool) 2>&1 )
    case "$out" in
        *-aaaa-*|*-bbbb-*) echo "ok $out" ;;
        *) echo "FAIL $out" | tr '\\n' ' '; echo ;;
    esac
done
"""


def test_jobs_loading_from_current_never_fail_while_it_is_switched(tmp_path):
    """Two jobs load and run a module in a loop while `current` flips between two releases
    as fast as switch goes; every load finds a whole tree."""
    ids = ["20250101T000000Z-aaaa-1111", "20250102T000000Z-bbbb-2222"]
    for rid in ids:
        make_release(tmp_path, rid, modules=30)
    releases.switch(tmp_path, ids[0])
    stop = tmp_path / "stop"
    logs = [tmp_path / f"job{i}.log" for i in range(2)]
    outputs = [open(log, "w") for log in logs]  # noqa: SIM115 (closed below)
    jobs = [subprocess.Popen(["bash", "--noprofile", "--norc", "-c",
                              JOB.format(init=LMOD_INIT, root=tmp_path, stop=stop)],
                             stdout=output, stderr=subprocess.STDOUT, env=clean_env())
            for output in outputs]
    switches = 0

    def flip():
        nonlocal switches
        while not stop.exists():
            releases.switch(tmp_path, ids[(switches + 1) % 2])
            switches += 1

    def enough():
        """15 loads by each job, both trees seen, more than 30 switches: counted, not timed
        (a slow machine takes longer to get there, and the test waits)."""
        seen = [log.read_text().splitlines() for log in logs]
        return (min(map(len, seen)) >= 15 and switches > 30
                and {line.split()[1] for lines in seen for line in lines if len(line.split()) > 1}
                >= set(ids))

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        # the bound only guards against a hang (a job that died): generous on any machine
        give_up = time.monotonic() + 1800
        while not enough():
            assert time.monotonic() < give_up and all(j.poll() is None for j in jobs), \
                [log.read_text()[-500:] for log in logs]
            threading.Event().wait(0.2)
    finally:
        stop.touch()
        flipper.join()
        for job, output in zip(jobs, outputs, strict=True):
            job.wait(timeout=600)
            output.close()
    lines = [line for log in logs for line in log.read_text().splitlines()]
    assert len(lines) >= 30 and switches > 30
    assert [line for line in lines if not line.startswith("ok ")] == []
    assert {line.split()[1] for line in lines} == set(ids)  # both trees were seen


def test_the_timing_harness_times_both_commands_with_and_without_the_cache(tmp_path):
    out = tmp_path / "rows.json"
    p = subprocess.run([sys.executable, "-m", "iostack_testbed", "lmod-bench", "--generated", "120",
                        "--runs", "2", "--json", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    rows = json.loads(out.read_text())
    assert [r["command"] for r in rows] == ["avail (cache)", "avail (no cache)",
                                            "spider (cache)", "spider (no cache)"]
    assert all(r["tree"] == "generated" and 100 <= r["modules"] <= 140 and r["runs"] == 2
               and 0 < r["min_s"] <= r["median_s"] <= r["max_s"] for r in rows)
    table = [line for line in p.stdout.splitlines() if not line.startswith("+ ")]  # commands shown
    assert table[0].split()[:3] == ["tree", "modules", "command"]
    bad = subprocess.run([sys.executable, "-m", "iostack_testbed", "lmod-bench", "--root", str(tmp_path)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "no spider cache" in bad.stderr
