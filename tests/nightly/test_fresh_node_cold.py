"""A fresh Debian 12 node deploys `local` from source, as a new site's first deploy does, and
passes the nightly's FDB bit-identity check on it. (CI proves the same node's set-up and a
deploy from the build cache; the build from source takes longer than CI's budget.)"""
import time

SCRIPT = ("bin/iostack deploy --site local --root /srv/iostack -- -n FdbBitIdentityCheck "
          "&& bin/iostack releases --site local --root /srv/iostack")


def test_fresh_node_deploys_local_from_source_and_passes_a_nightly_check(fresh_bookworm_node,
                                                                          timings):
    root, setup_run = fresh_bookworm_node
    assert setup_run.returncode == 0, setup_run.output[-3000:]
    start = time.monotonic()
    p = root.run(["sh", "-c", SCRIPT], timeout=6 * 3600)  # the nightly tier: over an hour
    timings["fresh node: cold deploy of local + FdbBitIdentityCheck"] = time.monotonic() - start
    assert p.returncode == 0, p.output[-6000:]
    assert "No binary for" in p.output  # built here, from the mirror's sources
    releases = [line for line in p.stdout.splitlines() if line.startswith("*")]
    assert len(releases) == 1 and releases[0].rstrip().endswith("current"), p.stdout[-2000:]
    assert "passed" in releases[0]
    assert root.daemons() == []
