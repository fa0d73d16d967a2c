"""Two releases of a deployment as deploy leaves them, for the user's guide's tests (unit and
browser): the committed local lock (the newer without nvme-stage), module files as Spack
writes them (Lmod hierarchy, autoloads as depends_on), the meta-modules; the older current."""
import copy
import json
import shutil

from iostack.core import paths
from iostack.deployment import releases

LOCAL = paths.REPO / "spack-env" / "sites" / "local" / "spack.lock"


def make_release(root, rid, lock, created):
    path = root / "releases" / rid
    path.mkdir(parents=True)
    (path / "spack.lock").write_text(json.dumps(lock))
    (path / "release.json").write_text(json.dumps(
        {"id": rid, "site": "local", "env": "local", "created": created, "commit": "c0ffee" * 6,
         "regression": "passed"}))
    core = path / "modulefiles" / "Core"
    fdb = path / "modulefiles" / "openmpi" / "4.1.4" / "Core" / "fdb" / "5.13.106.lua"
    fdb.parent.mkdir(parents=True)
    # what Spack's Lmod template writes for fdb with autoload: direct
    fdb.write_text('whatis([[Name : fdb]])\ndepends_on("eckit/1.28.8")\n'
                   'depends_on("metkit/1.11.22")\nprepend_path("PATH", "/x/bin", ":")\n')
    for meta in ("iostack", "openifs-env"):
        shutil.copytree(paths.META_MODULES / meta, core / meta)
    return releases.load(path)


def a_deployment(tmp_path):
    root = tmp_path / "root"
    old_lock = json.loads(LOCAL.read_text())
    new_lock = copy.deepcopy(old_lock)
    nvme = next(h for h, s in new_lock["concrete_specs"].items() if s["name"] == "nvme-stage")
    del new_lock["concrete_specs"][nvme]
    new_lock["roots"] = [r for r in new_lock["roots"] if r["hash"] != nvme]
    old = make_release(root, "20260101T000000Z-aaaaaaaaaa-1111111111", old_lock,
                       "2026-01-01T00:00:00Z")
    new = make_release(root, "20260201T000000Z-bbbbbbbbbb-2222222222", new_lock,
                       "2026-02-01T00:00:00Z")
    (root / "current").symlink_to(f"releases/{old.id}")
    return root, old, new
