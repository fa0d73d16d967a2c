"""The process environment is read once, by the CLI, into Settings; below it, no library
module reads configuration from os.environ or writes it (iostack.core.settings)."""
import ast
import os
import pathlib

import pytest

from iostack.core import paths
from iostack.core.settings import CHILD_VARIABLES, VARIABLES, Settings

LIB = paths.LIB / "iostack"
#: (module, function) that may read os.environ: the CLI; the repository's location (where
#: the data is, before any command); the one place that starts processes (a child inherits
#: the environment); the names of Lmod's variables a child is run without; and the `main`
#: of each module that runs as a process of its own (a job-side tool, the storage child)
READERS = {("cli", "*"), ("core.paths", "_repo"), ("core.paths", "require_repo"),
           ("core.process", "environment"), ("deployment.lmodcache", "lmod_variables"),
           ("*", "main")}
WRITES = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__"}


def _uses(tree: ast.AST):
    """(function name or '', node, written) of each use of os.environ / os.putenv."""
    def visit(node, function):
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else function
            if isinstance(child, ast.Attribute) and child.attr == "environ" and \
                    isinstance(child.value, ast.Name) and child.value.id == "os":
                yield function, child
            if isinstance(child, ast.Attribute) and child.attr in ("putenv", "unsetenv") and \
                    isinstance(child.value, ast.Name) and child.value.id == "os":
                yield function, child
            yield from visit(child, name)
    yield from visit(tree, "")


def _writes(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        target = None
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            for t in getattr(node, "targets", None) or [node.target]:
                if isinstance(t, ast.Subscript):
                    target = t.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in WRITES:
                target = node.func.value
            elif node.func.attr in ("putenv", "unsetenv"):
                lines.append(node.lineno)
        if isinstance(target, ast.Attribute) and target.attr == "environ":
            lines.append(node.lineno)
    return lines


def _modules():
    for path in sorted(LIB.rglob("*.py")):
        module = ".".join(path.relative_to(LIB).with_suffix("").parts)
        yield module, ast.parse(path.read_text(), str(path))


def test_no_library_module_writes_the_process_environment():
    written = {m: lines for m, tree in _modules() if (lines := _writes(tree))}
    assert written == {}


def test_only_the_cli_and_process_entry_points_read_it():
    readers = sorted({(m, f or "<module>") for m, tree in _modules() for f, _ in _uses(tree)
                      if not ({(m, "*"), ("*", f), (m, f)} & READERS)})
    assert readers == []


def test_the_checks_find_a_planted_read_and_write(tmp_path):
    # the two scans above see what they must refuse
    tree = ast.parse("import os\ndef f():\n    os.environ['X'] = '1'\n    return os.environ.get('Y')\n")
    assert _writes(tree) == [3]
    assert [f for f, _ in _uses(tree)] == ["f", "f"]
    assert _writes(ast.parse("import os\nos.environ.update(a=1)\nos.putenv('a', 'b')\n")) == [2, 3]


@pytest.mark.parametrize("variable, field, value, expected", [
    ("IOSTACK_ROOT", "root", "/r", pathlib.Path("/r")),
    ("IOSTACK_CACHE", "cache", "/c", pathlib.Path("/c")),
    ("IOSTACK_VENV", "venv", "/v", pathlib.Path("/v")),
    ("SPACK_ROOT", "spack_root", "/s", pathlib.Path("/s")),
    ("IOSTACK_SPACK_PACKAGES", "spack_packages", "/p", pathlib.Path("/p")),
    ("IOSTACK_SPACK_BUNDLE", "spack_bundle", "/b", pathlib.Path("/b")),
    ("IOSTACK_APT_LOCK_TIMEOUT", "apt_lock_timeout", "7", 7),
    ("IOSTACK_RFM_REFERENCES", "references", "/refs", pathlib.Path("/refs")),
    ("IOSTACK_SAMPLES", "samples", "/samples", pathlib.Path("/samples")),
    ("RFM_SQLITE_DB_FILE", "results_db", "/db/results.db", pathlib.Path("/db/results.db")),
    ("LMOD_CMD", "lmod_cmd", "/lmod", "/lmod"),
    ("IOSTACK_STATE", "state", "/st", pathlib.Path("/st")),
    ("IOSTACK_USER", "user", "builder", "builder"),
])
def test_each_variable_sets_its_one_setting(variable, field, value, expected):
    base = Settings.from_environ({"HOME": "/home/u"}, uid=1000)
    given = Settings.from_environ({"HOME": "/home/u", variable: value}, uid=1000)
    assert getattr(given, field) == expected != getattr(base, field)
    changed = [f for f in base.__dataclass_fields__ if getattr(base, f) != getattr(given, f)]
    # the cache moves the state and the samples by default, nothing else
    assert changed == ([field, "state", "samples"] if field == "cache" else [field])


def test_every_documented_variable_is_read_and_no_other():
    read = {v for v in VARIABLES if v in ast.unparse(ast.parse(
        (paths.LIB / "iostack" / "core" / "settings.py").read_text()).body[-1])}
    assert read == set(VARIABLES)


def test_readme_lists_every_variable_with_its_meaning():
    """README's "Environment variables" table is VARIABLES, row for row."""
    import re

    text = (paths.REPO / "README.md").read_text()
    table = text.split("**Environment variables.**", 1)[1].split("\n\n", 2)[1]
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", table, re.M))
    assert rows == VARIABLES


def test_defaults_follow_home_and_xdg_and_roots_is_the_nodes():
    user = Settings.from_environ({"HOME": "/h"}, uid=1000)
    assert user.cache == user.state == pathlib.Path("/h/.cache/iostack")
    assert user.key_ring == pathlib.Path("/h/.cache/iostack/gpg")
    assert Settings.from_environ({"HOME": "/h", "XDG_CACHE_HOME": "/x"}, uid=1000).cache == \
        pathlib.Path("/x/iostack")
    # root's is where its service account can read it (~root is 0700)
    root = Settings.from_environ({"HOME": "/root"}, uid=0)
    assert root.cache == root.state == pathlib.Path("/var/cache/iostack")
    assert root.user == "iostack"
    assert root.account_state("iostack") == pathlib.Path("/var/cache/iostack/accounts/iostack")
    # the service account run by hand (sudo -u): root's cache, and its state as root gives it
    import pwd

    named = pwd.getpwuid(os.getuid()).pw_name if os.getuid() else "nobody"
    uid = pwd.getpwnam(named).pw_uid
    by_hand = Settings.from_environ({"HOME": "/h", "IOSTACK_USER": named}, uid=uid)
    assert (by_hand.cache, by_hand.state) == (pathlib.Path("/var/cache/iostack"),
                                              pathlib.Path(f"/var/cache/iostack/accounts/{named}"))
    # and with a cache given (the Ansible roles' own, the account's), its state is that cache
    given = Settings.from_environ({"IOSTACK_USER": named, "IOSTACK_CACHE": "/c"}, uid=uid)
    assert given.cache == given.state == pathlib.Path("/c")
    assert Settings.from_environ({"HOME": "/h"}).deploy_root("local") == \
        paths.REPO / "deploy" / "local"
    assert Settings.from_environ({"IOSTACK_ROOT": "/r"}).deploy_root("local", "/given") == \
        pathlib.Path("/given")


def test_what_children_are_given_is_documented_once(tmp_path):
    from iostack.regression import reframe
    from iostack.site.target import SpackEnv, Target
    from iostack.spack import runner

    # a Spack where set-up puts it, for the runner's environment
    (tmp_path / "spack" / "bin").mkdir(parents=True)
    (tmp_path / "spack" / "bin" / "spack").touch()
    builtin = tmp_path / "spack-packages" / "repos" / "spack_repo" / "builtin"
    builtin.mkdir(parents=True)
    (builtin / "repo.yaml").touch()
    settings = Settings.from_environ({"HOME": "/h", "LMOD_CMD": "/lmod",
                                      "IOSTACK_CACHE": str(tmp_path)})
    target = Target(settings, SpackEnv("local"), pathlib.Path("/r"))
    for given in (reframe.environment(target), runner.environment(settings, target.root)):
        ours = {k for k in given if k.startswith("IOSTACK_")}
        assert ours <= set(CHILD_VARIABLES), ours - set(CHILD_VARIABLES)


def test_the_unit_tier_refuses_to_start_a_program():
    """tests/unit/conftest.py: the unit tier is pure Python (tests/conftest.py says so)."""
    import subprocess

    with pytest.raises(AssertionError, match="the unit tier runs no programs"):
        subprocess.run(["true"])
