"""Application and I/O benchmark checks' library: what OpenIFS, OpenFOAM, IO500, IOR/mdtest
and the NetCDF output benchmark have in common, so each check in reframe-tests/checks/ is
thin (its parameters, its workload, its sanity and performance figures).

ReFrame side:
- base: AppCheck (recorded references, MPI launch as steps, application modules per
  environment feature) and the sanity/performance helpers of steps;
- build: CMake build fixtures (the NetCDF output benchmark);
- openfoam: OpenFOAM case commands and log/case readers;
- ior: IOR/mdtest expectations and optional Darshan instrumentation.

Standard library only, so they run in jobs (`python3 -m iostack_rfm.apps.<module>`) and in
unit tests:
- steps: named, timed shell steps;
- foamcase: what an OpenFOAM run wrote, with one digest over it;
- openifs: seed 000's cases, namelist edits, GRIB-files-against-FDB comparison;
- io500: the ini a run is configured with, score and validity problems;
- netcdf: seed 002's output workload.
"""
