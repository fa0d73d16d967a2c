"""References for a timed check run on whatever node the test tier is on.

The committed baselines are `local`'s, measured on a quiet node of CI's kind over 20 nights
(tools/testbed/iostack_testbed/campaign.py), and their bands are narrow by design. A test that runs
Debian's programs (`builtin`) through the nightly is testing the nightly, not the node: it
gets a copy of the committed references in which its environment has, for each figure
`local` records, the same value with a band no working program leaves (1% of it, or 100
times it), so its verdict cannot depend on the node's speed. The gates' sensitivity is
tested on the campaign's recorded nights (tests/unit/test_gates_campaign.py).
"""
from __future__ import annotations

import pathlib
import shutil

from iostack.regression import references

#: the band: a value within it is a working program's, whatever the node
LOWER, UPPER = -0.99, 99.0


def widened(dest: pathlib.Path, partitions=("local:default",), environ="builtin") -> dict:
    """Write the copy into `dest`; returns the environment that points the checks at it."""
    shutil.copytree(references.REFERENCES_DIR, dest, dirs_exist_ok=True)
    for path in sorted(dest.glob("*.yaml")):
        data = references.load(path)
        for section in data.values():
            recorded = section.get("references") or {}
            local = {}
            for key, variants in recorded.items():
                partition, env = references.split_key(key)
                if partition == "local:default" and env:
                    for variant, entries in variants.items():
                        local.setdefault(variant, {}).update(entries)
            # the band holds on every node (a key without @node): a node's own recorded
            # entries of the environment would take precedence over it, so they go
            for key in [k for k in recorded if references.node_of(k)
                        and references.split_key(k)[0] in partitions
                        and references.split_key(k)[1] == environ]:
                del recorded[key]
            for partition in partitions:
                for variant, entries in local.items():
                    for var, e in entries.items():
                        wide = {"lower": LOWER if e.get("lower") is not None else None,
                                "upper": UPPER if e.get("upper") is not None else None}
                        references.record(section, references.key(partition, environ),
                                          variant, var, e["value"], e.get("unit"),
                                          {"copied_from": "local:default", "band": "the test's"},
                                          **wide)
        references.dump(path, data)
    return {"IOSTACK_RFM_REFERENCES": str(dest)}
