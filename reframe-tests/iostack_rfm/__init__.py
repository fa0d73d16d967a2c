"""iostack's ReFrame library: what the checks in reframe-tests/checks/ share, split by kind.
This package imports nothing, so `python3 -m iostack_rfm.jobs.<tool>` needs no ReFrame.

- ReFrame plugins, here at the top (ReFrame loads them with the configuration and the
  checks): base.py, the one mixin every check uses (`IostackMixin`: recorded references,
  application environments, I/O directories, resources, launch, job PYTHONPATH) and
  `AppCheck`, its base for checks made of named steps; `parsed(reader, *paths)`, the one way
  a sanity or performance function reads a file of the job; config.py, the ReFrame
  configuration of a site built from its facts (the generated reframe-tests/config/<site>.py
  import it); context.py, what bin/iostack tells a ReFrame run; launchers.py, the launcher
  `mpirun-ranks`. A new check subclasses IostackMixin or AppCheck and keeps its own base
  class, fixtures and thin simple_tests in its check file.
- parsers/: what checks and plugins compute from text, no ReFrame, no programs started: one
  module per application or benchmark with its output parsers and problem checks (text in,
  list of problems out): io500.py, ior.py (IOR and mdtest), netcdf.py ([INMCM-NetCDF]'s
  workload), fdb.py (fdb-hammer and fio, for the throughput check), smoke.py (version
  queries of the stack smoke check), binding.py (the binding check's judge); steps.py (the
  named, timed shell steps of a job) and slots.py (the host slot's shell lines and stamps).
- jobs/: the job-side tools, run in jobs as `python3 -m iostack_rfm.jobs.<module>` by any
  python3: standard library only (and each other). gribgen.py (the checks' synthetic GRIB
  input, encoded by the environment's ecCodes), gribcompare.py (GRIB comparison, for every
  bit-identity check), fdbretrieve.py, multio.py, nodestate.py, ifstest.py; openifs.py and
  openfoam.py also hold their application's parsers, which the checks import from there.
- templates/: scripts the jobs run.

A new parser or problem check goes into its application's module, with a unit test in
tests/unit/test_app_<module>.py. No build fixtures: a check runs the programs the release
deployed (its modules) or, in `builtin`, Debian's.

pyproject.toml's import contracts hold the split: job tools import nothing but the standard
library and each other (nor the plugins, the parsers or `iostack`); parsers import neither
ReFrame, the plugins nor the job tools. Domain code the CLI shares (references format, lock
reader, FDB config, results DB) lives in the `iostack` package in lib/; pyproject.toml
installs both.
"""
