"""Application and I/O benchmark checks' library: what OpenIFS, OpenFOAM, IO500, IOR/mdtest
and the NetCDF output benchmark have in common, so each check in reframe-tests/checks/ is
thin (its parameters, its workload, its sanity and performance figures).

- base: ReFrame mixins and the step pattern (every command of a job is a named, timed step
  whose exit status the sanity checks); app modules per environment; MPI launch;
- build: CMake build fixtures;
- openfoam, netcdf, io500, ior, openifs: each application's fetch/run/parse pieces.

Modules named in base, build and the *_check parts import ReFrame. The workload tables and
the job-side tools (`python3 -m iostack_rfm.apps.openifs ...`) are standard library only,
like iostack_rfm.gribcompare, so they run on compute nodes and in unit tests.
"""
