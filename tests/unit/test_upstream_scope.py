"""The Spack scope a release gives its users (lib/iostack/deployment/upstream.py): what each
file says, read back as Spack would (YAML), on a release laid out as deploy leaves it. The
Spack tier (tests/spack/test_spack_user_upstream.py) builds on it as an unprivileged user."""
import os
import shutil
import stat

import yaml

from iostack.core import paths
from iostack.deployment import upstream


def a_release(tmp_path):
    root = tmp_path / "root"
    release = root / "releases" / "20260101T000000Z-abc-def"
    site = release / "spack-env" / "sites" / "local"
    site.mkdir(parents=True)
    shutil.copy(paths.REPO / "spack-env" / "sites" / "local" / "packages.yaml", site)
    db = root / "opt" / ".spack-db"
    db.mkdir(parents=True)
    (db / "index.json").write_text("{}")
    return root, release


def test_the_scope_names_the_install_tree_the_recipes_and_the_sites_externals(tmp_path):
    root, release = a_release(tmp_path)
    scope = upstream.write(release, root, "local")
    assert scope == release / "spack-user"
    read = {f: yaml.safe_load((scope / f).read_text()) for f in
            ("upstreams.yaml", "repos.yaml", "packages.yaml", "concretizer.yaml")}
    ((name, up),) = read["upstreams.yaml"]["upstreams"].items()
    assert name == f"iostack-local-{release.name}" and up == {"install_tree": str(root / "opt")}
    recipes = read["repos.yaml"]["repos"]["iostack"]
    assert recipes == str(scope / "repos" / "spack_repo" / "iostack")
    assert yaml.safe_load(open(f"{recipes}/repo.yaml"))["repo"]["namespace"] == "iostack"
    assert os.path.isfile(f"{recipes}/packages/fdb/package.py")
    site = yaml.safe_load((paths.REPO / "spack-env/sites/local/packages.yaml").read_text())
    assert read["packages.yaml"] == site and read["packages.yaml"]["packages"]["eccodes"]
    assert read["concretizer.yaml"] == {"concretizer": {"reuse": True}}
    assert f"spack -C {scope} install" in (scope / "README.md").read_text()
    assert not list(scope.rglob("__pycache__"))


def test_a_database_only_its_owner_could_read_is_made_readable(tmp_path, capsys):
    root, release = a_release(tmp_path)
    index = root / "opt" / ".spack-db" / "index.json"
    index.chmod(0o600)
    index.parent.chmod(0o700)
    upstream.write(release, root, "local")
    assert stat.S_IMODE(index.stat().st_mode) == 0o644
    assert stat.S_IMODE(index.parent.stat().st_mode) == 0o755
    assert "made readable by users" in capsys.readouterr().out
    upstream.write(release, root, "local")     # again: nothing to change, nothing said
    assert "made readable" not in capsys.readouterr().out
