-- openifs-env: OpenIFS with the libraries it writes its output with. Like [OIFS-HECToR]'s
-- openifs_cce, one module loads the matching GRIB and FDB modules. Each version file
-- (0.0.1.lua, ...) is a symlink to this one; the table below is what differs between them.
local versions = {
  ["0.0.1"] = { fdb = false, async_write = false,
                what = "GRIB-file output (ICMGG/ICMSH per step, namelist LFDBOP=F)" },
  ["0.0.2"] = { fdb = true, async_write = false,
                what = "FDB output (LFDBOP=T), FDB's default buffering; production" },
  ["0.0.3"] = { fdb = true, async_write = true,
                what = "FDB output with asynchronous archive (FDB_ASYNC_WRITE); testing" },
}
local version = myModuleVersion()
local v = versions[version]
if not v then
  LmodError("openifs-env: no settings for version ", version, " in ", myFileName())
end

whatis("Name: openifs-env")
whatis("Version: " .. version .. ": " .. v.what)
-- The same for every version: `module spider openifs-env` shows the description of the
-- last version file, whichever is the default.
whatis("Description: OpenIFS with the libraries it writes its output with (ecCodes, FDB), "
       .. "one version per output mode; the default writes FDB")
help([[
OpenIFS with its output libraries: ]] .. v.what .. [[.
Loads ecCodes]] .. (v.fdb and ", FDB, MultIO" or "") .. [[ and OpenIFS (where the site has them),
craype-hugepages2M on Cray EX ([OIFS-HECToR] recommends 2 MB pages), and sets IOSTACK_OIFS_OUTPUT
for the run scripts. FDB reads FDB5_CONFIG_FILE, set when the deployment has a config.
]])

-- One OpenIFS environment at a time. Lmod exports the family as LMOD_FAMILY_<NAME>, so
-- the name must be a shell identifier (Lmod 8.7 refuses anything else).
family("openifs_env")

-- What loads each package on this release's tree, its compiler's and MPI's modules first
-- (fdb sits under openmpi/<version>/Core): <root>/etc/lmod/hierarchy.lua, which
-- bin/iostack deploy writes from the release's spack.lock. Without it (a flat tree), a
-- package's own name.
local root = myFileName():match("^(.*)/modulefiles/[^/]+/openifs%-env/[^/]+$")
local chains_file = root and pathJoin(root, "etc", "lmod", "hierarchy.lua")
local chains = {}
if chains_file and isFile(chains_file) then
  chains = loadfile(chains_file)()
end

-- depends_on, not load: unloading this module leaves what the user had loaded before.
local function need(name)
  for _, module in ipairs(chains[name] or { name }) do
    depends_on(module)
  end
end

need("eccodes")
if v.fdb then
  need("fdb")
  -- OpenIFS writes FDB through MultIO (imultio_write_); its tools (multio-sink, multio-hammer)
  if isAvail("multio") then
    need("multio")
  end
end
-- OpenIFS itself is built on the compute-stack sites only; elsewhere the tools suffice.
if chains["openifs"] or isAvail("openifs") then
  need("openifs")
end
if isAvail("craype-hugepages2M") then
  depends_on("craype-hugepages2M")
end

setenv("IOSTACK_OIFS_OUTPUT", v.fdb and "fdb" or "grib")

if v.fdb then
  -- <root>/modulefiles/Core/openifs-env/<version>.lua -> <root>/etc/fdb5/config.yaml
  local config = root and pathJoin(root, "etc", "fdb5", "config.yaml")
  if config and isFile(config) then
    setenv("FDB5_CONFIG_FILE", config)
  end
end
if v.async_write then
  -- FDB5 resource fdbAsyncWrite (default false): a run-time setting, never a build one
  setenv("FDB_ASYNC_WRITE", "1")
end
