-- openifs-env/0.0.1: OpenIFS with the libraries it writes its output with.
-- Like seed 000's openifs_cce: one module loads the matching GRIB and FDB modules.
-- This version: GRIB-file output (ICMGG/ICMSH per step, namelist LFDBOP=F).
whatis("Name: openifs-env")
whatis("Version: 0.0.1")
whatis("Description: OpenIFS, ecCodes; GRIB-file output (ICMGG/ICMSH per step, namelist LFDBOP=F)")
help([[
OpenIFS 0.0.1: GRIB-file output (ICMGG/ICMSH per step, namelist LFDBOP=F).
Loads ecCodes and OpenIFS (where this site has it),
craype-hugepages2M on Cray EX (seed 000 recommends 2 MB pages), and sets IOSTACK_OIFS_OUTPUT
for the run scripts. FDB reads FDB5_CONFIG_FILE, set here when the deployment has one.
]])

-- Loading another version swaps this one out.
family("openifs-env")

load("eccodes")
-- OpenIFS itself is built on the compute-stack sites only; elsewhere the tools suffice.
if isAvail("openifs") then
  load("openifs")
end
if isAvail("craype-hugepages2M") then
  load("craype-hugepages2M")
end

setenv("IOSTACK_OIFS_OUTPUT", "grib")
