"""iostack's ReFrame library: what the checks in reframe-tests/checks/ share. Where things go:

- base.py: the one mixin every check uses (`IostackMixin`: recorded references,
  application environments, I/O directories, resources, launch, job PYTHONPATH) and
  `AppCheck`, its base for checks made of named steps; `parsed(reader, *paths)`, the one way
  a sanity or performance function reads a file of the job. A new check subclasses one of
  them and keeps its own base class, fixtures and thin simple_tests in its check file.
- builds.py: every build fixture (gribgen; CMake builds of src/).
- one module per application or benchmark, standard library only, holding its output
  parsers, its problem checks (text in, list of problems out) and its job-side tool:
  openifs.py, openfoam.py, io500.py, ior.py (IOR and mdtest), netcdf.py ([INMCM-NetCDF]'s
  workload), fdb.py (fdb-hammer and fio, for the throughput check), gribcompare.py (GRIB
  comparison, for every bit-identity check), smoke.py (version queries of the stack smoke
  check). A new parser or problem check goes into its application's module, with a unit
  test in tests/unit/test_app_<module>.py.
- steps.py: the named, timed shell steps of a job (standard library only).
- templates/: scripts the jobs run.

Job-side tools run in jobs as `python3 -m iostack_rfm.<module>` (and `python3 -m
iostack.deployment.fdbconfig`), with the PYTHONPATH the mixin sets; they import nothing but the
standard library and each other. Domain code the CLI shares (references format, lock
reader, FDB config, results DB) lives in the `iostack` package in lib/; pyproject.toml installs both.
"""
