-- iostack: this release's modules for the compiler the user has loaded. Spack puts the
-- builds of a non-core compiler in a compiler level of the release's tree,
-- <root>/modulefiles/<compiler>/<version> (spack-env/sites/<site>/modules.yaml). A compiler
-- Spack built would open that level itself; a vendor's compiler does not know it. On an HPE
-- Cray PE the compiler module (family "compiler", e.g. cce/16.0.1 of PrgEnv-cray) adds the
-- directory named by LMOD_CUSTOM_COMPILER_<level>_PREFIX, its level being the
-- CRAY_LMOD_COMPILER it sets (crayclang/14.0): this module points that variable at the
-- loaded compiler's level and adds it now. Later PrgEnv swaps go through the PE's own
-- modules: unloading the compiler takes the level away (Lmod then reloads what came from
-- it), loading one whose variable is set adds its level. ARCHER2 extends its PE the same
-- way [ARCHER2-Lmod]; the lmod role sets the variables at login for every compiler level
-- of the site (ansible/roles/lmod). Where no compiler level fits, it does nothing.
whatis("Name: iostack")
whatis("Description: the iostack release's modules for the loaded compiler (its Lmod compiler level)")
help([[
Load after the programming environment (e.g. module load PrgEnv-cray iostack): the
release's builds with that PrgEnv's compiler become visible, ahead of the core ones.
]])

-- <root>/modulefiles/<level>/iostack/<version>.lua -> <root>
local root = myFileName():match("^(.*)/modulefiles/[^/]+/iostack/[^/]+$")
local compiler = os.getenv("LMOD_FAMILY_COMPILER")
local version = os.getenv("LMOD_FAMILY_COMPILER_VERSION")
local level = root and compiler and version and pathJoin(root, "modulefiles", compiler, version)
-- Only a level this module adds is its to take away: one the PE's compiler module added
-- (the login script named it) stays the PE's, so unloading the compiler removes it.
local on_path = level and (":" .. (os.getenv("MODULEPATH") or "") .. ":"):find(":" .. level .. ":", 1, true)
local mine = level and os.getenv("IOSTACK_COMPILER_LEVEL") == level
if level and isDir(level) and ((mode() == "load" and not on_path) or (mode() ~= "load" and mine)) then
  local cray_level = os.getenv("CRAY_LMOD_COMPILER")
  if cray_level then
    -- the name HPE's compiler modules read: upper case, / . - as _
    local name = "LMOD_CUSTOM_COMPILER_" .. cray_level:upper():gsub("[/.-]", "_") .. "_PREFIX"
    prepend_path(name, level)
  end
  setenv("IOSTACK_COMPILER_LEVEL", level)
  prepend_path("MODULEPATH", level)
end
