"""A release's user's guide (lib/iostack/deployment/guide.py) from a release laid out as
deploy leaves it: the committed local lock, module files as Spack writes them (Lmod
hierarchy, autoloads as depends_on), the meta-modules, and an older release to compare with.
tests/integration/test_guide_browser.py opens the page in Chromium."""
from support.guide_release import a_deployment

from iostack.deployment import guide, upstream

def test_the_guide_names_modules_builds_storage_and_what_changed(tmp_path):
    root, old, new = a_deployment(tmp_path)
    page = guide.write(root, new, ("gcc@12.2.0",)).read_text()
    assert guide.GUIDE.parts == ("guide", "index.html")
    # fdb sits under its MPI in the hierarchy; its module file's autoloads are listed
    assert ("<tr><td>fdb</td><td>5.13.106</td><td><code>module load openmpi/4.1.4 "
            "fdb/5.13.106</code></td><td>eckit/1.28.8, metkit/1.11.22</td></tr>") in page
    assert f"module use {root}/current/modulefiles/Core" in page
    # ecCodes is Debian's on local, and its tree has no module for it: none to load
    assert "<tr><td>eccodes</td><td>2.28.0</td><td>none: the system's, in /usr</td>" in page
    assert "<td><code>openifs-env/0.0.3</code></td><td>OpenIFS with the libraries" in page
    # the Spack upstream, the CMake and pkg-config ways
    assert f"spack -C {upstream.scope_dir(new.path)} install my-model" in page
    assert "find_package(fdb5 REQUIRED)" in page and "pkg-config --cflags --libs eccodes" in page
    # local's facts: scratch is the stage, no file system declared
    assert '<h2 id="storage">' in page
    # against the release users have (current): nvme-stage dropped
    assert f"Since <code>{old.id}</code>: 1 change," in page
    assert ('<tr class="removed"><td>removed</td><td>nvme-stage</td><td>1.1.0</td><td></td>'
            in page)
    # every spec: externals named as the system's
    assert "<td>cmake</td><td>3.25.1</td>" in page and "/usr (the system&#x27;s)" in page


def test_the_first_release_says_so_and_a_lustre_site_gets_striping_advice(tmp_path):
    root, old, _ = a_deployment(tmp_path)
    assert guide.previous_release(root, old) is None
    assert "The first release of this deployment." in guide.render(root, old)
    rows = guide.site_storage("setonix")
    assert any("/scratch (lustre, shared)" in where and "lfs setstripe" in advice
               for _, _, where, advice in rows), rows
