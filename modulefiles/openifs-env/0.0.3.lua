-- openifs-env/0.0.3: OpenIFS with the libraries it writes its output with.
-- Like seed 000's openifs_cce: one module loads the matching GRIB and FDB modules.
-- This version: FDB output with asynchronous archive (FDB_ASYNC_WRITE); testing.
whatis("Name: openifs-env")
whatis("Version: 0.0.3")
whatis("Description: OpenIFS, ecCodes and FDB; FDB output with asynchronous archive (FDB_ASYNC_WRITE); testing")
help([[
OpenIFS 0.0.3: FDB output with asynchronous archive (FDB_ASYNC_WRITE); testing.
Loads ecCodes, FDB and OpenIFS (where this site has it),
craype-hugepages2M on Cray EX (seed 000 recommends 2 MB pages), and sets IOSTACK_OIFS_OUTPUT
for the run scripts. FDB reads FDB5_CONFIG_FILE, set here when the deployment has one.
]])

-- Loading another version swaps this one out.
family("openifs-env")

load("eccodes")
load("fdb")
-- OpenIFS itself is built on the compute-stack sites only; elsewhere the tools suffice.
if isAvail("openifs") then
  load("openifs")
end
if isAvail("craype-hugepages2M") then
  load("craype-hugepages2M")
end

setenv("IOSTACK_OIFS_OUTPUT", "fdb")

-- <root>/modulefiles/Core/openifs-env/<version>.lua -> <root>/etc/fdb5/config.yaml
local root = myFileName():match("^(.*)/modulefiles/[^/]+/openifs%-env/[^/]+$")
local config = root and pathJoin(root, "etc", "fdb5", "config.yaml")
if config and isFile(config) then
  setenv("FDB5_CONFIG_FILE", config)
end

-- FDB5 resource fdbAsyncWrite (default false); a run-time setting, never a build one
setenv("FDB_ASYNC_WRITE", "1")
