"""Set-up's one line for a failed step, from what apt really prints: each text below was
captured from apt 2.6 in a Debian 12 root, in the scenarios tests/integration/
test_fresh_node.py runs end to end (a held lock, no network, a full archive directory)."""
import pytest

from iostack.offline import setup

APT_LOCKED_AFTER_TIMEOUT = ("E: Unable to acquire the dpkg frontend lock "
                            "(/var/lib/dpkg/lock-frontend), is another process using it?\n")
APT_LOCKED = ("E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 944 "
              "(python3)\nN: Be aware that removing the lock file is not a solution and may "
              "break your system.\nE: Unable to acquire the dpkg frontend lock "
              "(/var/lib/dpkg/lock-frontend), is another process using it?\n")
APT_NO_NETWORK = ("E: Failed to fetch http://deb.debian.org/debian/dists/bookworm/InRelease  "
                  "Temporary failure resolving 'deb.debian.org'\nE: Some index files failed to "
                  "download. They have been ignored, or old ones used instead.\n")
APT_NO_SPACE = "E: You don't have enough free space in /var/cache/apt/archives/.\n"


@pytest.mark.parametrize("stderr,said", [
    (APT_LOCKED_AFTER_TIMEOUT, "apt-get install failed: /var/lib/dpkg/lock-frontend is held by "
                               "another process: wait for it to finish"),
    (APT_LOCKED, "apt-get install failed: /var/lib/dpkg/lock-frontend is held by another "
                 "process (python3, pid 944): wait"),
    (APT_NO_NETWORK, "apt-get install failed: the package registry cannot be reached (no network?)"),
    (APT_NO_SPACE, "apt-get install failed: no space left on device in /var/cache/apt/archives/:"),
])
def test_apt_failures_say_their_cause(stderr, said):
    assert setup.explain("apt-get install", stderr).startswith(said)


def test_an_unknown_failure_is_its_last_error_line():
    stderr = "Reading package lists...\nE: Unable to correct problems, you have held broken packages.\n"
    assert setup.explain("apt-get install", stderr) == (
        "apt-get install failed: E: Unable to correct problems, you have held broken packages.")
