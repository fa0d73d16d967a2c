"""iostack's Spack extension (spack-ext/spack-iostack): `spack offsite` is a real Spack
command wherever spack-env/common/config.yaml is included, it targets a cluster site's
declared libc, and it refuses a Spack whose internals it was not written for."""
from __future__ import annotations

import os
import subprocess

from iostack.spack import runner
from iostack.site.target import SpackEnv
from support import targets


def spack(root, *args, timeout=600):
    env = runner.environment(targets.settings(), root)
    p = subprocess.run([str(runner.spack_bin(targets.settings())), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout, env={**os.environ,
                                             **{k: str(v) for k, v in env.items()}})
    print(p.stdout[-3000:], p.stderr[-3000:])
    return p


def test_offsite_runs_a_command_with_the_sites_declared_libc(tmp_path):
    env_dir = runner.deployed_env(SpackEnv("cray-ex"), tmp_path)
    p = spack(tmp_path, "-e", env_dir, "offsite", "config", "get", "config")
    assert p.returncode == 0
    assert "the site's compilers are taken to target its declared libc glibc@=2.31" in p.stdout + p.stderr
    assert "install_tree:" in p.stdout       # the command it ran, with the environment's config


def test_offsite_refuses_a_spack_it_was_not_written_for(tmp_path):
    env_dir = runner.deployed_env(SpackEnv("cray-ex"), tmp_path)
    script = tmp_path / "newer.py"
    # the command as a newer Spack would run it: only the version differs
    script.write_text("import spack, spack.main\n"
                      "spack.spack_version_info = (1, 2, 0)\n"
                      "c = spack.main.SpackCommand('offsite')\n"
                      "c('config', 'get', 'config', fail_on_error=False)\n"
                      "print('rc', c.returncode)\n")
    p = spack(tmp_path, "-e", env_dir, "python", script)
    out = p.stdout + p.stderr
    assert "rc 1" in p.stdout
    assert ("spack offsite was written for Spack 1.1, whose CompilerPropertyDetector it changes "
            "(compiler_verbose_output, default_libc); this Spack is 1.2") in out
    assert "install_tree:" not in out        # nothing ran
