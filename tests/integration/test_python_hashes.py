"""A wheel swapped under its pinned name and version is refused: set-up installs the lock with
--require-hashes (from an index or a bundle's wheels alike), so pip takes a file only when
its sha256 is one the lock records. The attack runs set-up's own step (python_tools) with
a real pip on a wheelhouse; a venv is made for it (about 5 s)."""
from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile

import pytest

from iostack.offline import setup
from support import targets


def wheel(where, body: str):
    """A pure-Python wheel, tinypkg 1.0, whose module holds `body`."""
    files = {"tinypkg/__init__.py": body.encode(),
             "tinypkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: tinypkg\nVersion: 1.0\n",
             "tinypkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
                     for name, data in files.items()) + "tinypkg-1.0.dist-info/RECORD,,\n"
    where.mkdir(parents=True, exist_ok=True)
    path = where / "tinypkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in {**files, "tinypkg-1.0.dist-info/RECORD": record.encode()}.items():
            z.writestr(name, data)
    return path


@pytest.fixture
def lock(tmp_path, monkeypatch):
    """A lock pinning the genuine wheel, as pip-compile writes one, used as set-up's."""
    genuine = wheel(tmp_path / "genuine", "SAFE = True\n")
    digest = hashlib.sha256(genuine.read_bytes()).hexdigest()
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"tinypkg==1.0 \\\n    --hash=sha256:{digest}\n")
    monkeypatch.setitem(setup.REQUIREMENTS, "deploy", lock)
    return lock


def test_a_wheel_swapped_under_its_pinned_name_is_refused_in_one_line(tmp_path, lock):
    swapped = wheel(tmp_path / "bundle-wheels", "SAFE = False  # the attacker's\n")
    settings = targets.settings(IOSTACK_VENV=tmp_path / "venv")    # a venv of its own
    with pytest.raises(setup.SetupRefused) as refused:
        setup.python_tools(settings, ("deploy",), wheels=swapped.parent)
    assert str(refused.value) == (
        "pip install (from the bundle's wheels) failed: tinypkg==1.0 is not what the lock pins "
        "(its sha256 differs): the index, the mirror or the bundle's wheels served another "
        "file; someone may have tampered with it")
    assert subprocess.run([settings.python, "-c", "import tinypkg"], capture_output=True).returncode != 0


def test_the_genuine_wheel_installs_with_the_same_command(tmp_path, lock):
    """The control: set-up's own pip line, on the file the lock pins."""
    target = tmp_path / "target"
    p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", target,
                        "--no-index", "--find-links", tmp_path / "genuine",
                        "--require-hashes", "--no-deps", "-r", lock], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert (target / "tinypkg" / "__init__.py").read_text() == "SAFE = True\n"
