"""`python -m iostack.regression.storage CONFIG SYSTEM REPORT`: store a ReFrame run report's
session in the results DB, as `reframe -r` does at the end of a run. ReFrame has no command
for it, so this uses its storage module (`reframe.frontend.reporting.storage`), which is
not a public interface: it runs only under the ReFrame releases it was checked with
(KNOWN_REFRAME), and refuses others in one line.

It runs as a child of bin/iostack (iostack.regression.results.store), in the environment a
ReFrame run gets (iostack.regression.reframe.environment): the configuration reads it at
import, as it does under `reframe`. Prints the stored session's UUID.
"""
from __future__ import annotations

import sys

#: ReFrame releases whose storage backend this was checked against (requirements.txt pins
#: 4.10.4; tests/integration/test_nightly_robust.py stores a report through it)
KNOWN_REFRAME = ("4.10.",)


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: python -m iostack.regression.storage CONFIG SYSTEM REPORT", file=sys.stderr)
        return 2
    config, system, report_path = argv
    import json
    import os
    import sqlite3

    import reframe
    if not reframe.VERSION.startswith(KNOWN_REFRAME):
        print(f"iostack: error: ReFrame {reframe.VERSION}: storing a report uses its storage "
              f"module, checked with ReFrame {', '.join(v + 'x' for v in KNOWN_REFRAME)} only "
              "(lib/iostack/regression/storage.py KNOWN_REFRAME)", file=sys.stderr)
        return 1
    import reframe.core.config as rfm_config
    import reframe.core.runtime as rfm_runtime
    from reframe.core.exceptions import ReframeError
    from reframe.frontend.reporting.storage import StorageBackend

    with open(report_path) as f:
        report = json.load(f)
    uuid = report["session_info"]["uuid"]
    site_config = rfm_config.load_config(config)
    db = os.environ.get("RFM_SQLITE_DB_FILE")
    if db:   # what `reframe` does with the variable
        site_config.add_sticky_option("storage/sqlite_db_file", db)
    site_config.select_subconfig(system)
    rfm_runtime.init_runtime(site_config)
    try:
        print(StorageBackend.default().store(report, report_path))
    except sqlite3.IntegrityError:
        print(f"iostack: error: session {uuid} of {report_path} is already in the results DB "
              f"{db}", file=sys.stderr)
        return 1
    except (sqlite3.Error, ReframeError, OSError) as e:
        print(f"iostack: error: storing {report_path} in the results DB {db} failed: {e}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
