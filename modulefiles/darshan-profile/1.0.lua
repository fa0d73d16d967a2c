-- darshan-profile: profile a job's I/O with the release's Darshan, as centres offer it
-- (module load, run as usual, read the log). Loading it preloads libdarshan.so into every
-- program the shell starts: MPI programs write a log at MPI_Finalize; serial ones only with
-- DARSHAN_ENABLE_NONMPI=1. darshan-runtime's own module (which Spack writes) preloads
-- nothing, so building against it does not profile the build.
whatis("Name: darshan-profile")
whatis("Description: profile your job's I/O with Darshan: logs in $DARSHAN_LOG_DIR_PATH "
       .. "(default $HOME), read with darshan-parser or PyDarshan")
help([[
module load darshan-profile
srun ./my_model                      # or mpirun; serial: DARSHAN_ENABLE_NONMPI=1 ./prog
darshan-parser --total $DARSHAN_LOG_DIR_PATH/<user>_<exe>_id<jobid>_*.darshan
Logs go to DARSHAN_LOG_DIR_PATH, your $HOME unless you set it before loading.
]])

-- the release's modules for each package (<release>/etc/lmod/hierarchy.lua, as openifs-env)
local root = myFileName():match("^(.*)/modulefiles/[^/]+/darshan%-profile/[^/]+$")
local chains_file = root and pathJoin(root, "etc", "lmod", "hierarchy.lua")
local chains = {}
if chains_file and isFile(chains_file) then
  chains = loadfile(chains_file)()
end
for _, name in ipairs({ "darshan-runtime", "darshan-util" }) do
  for _, module in ipairs(chains[name] or { name }) do
    depends_on(module)
  end
end

-- Lmod has already unloaded darshan-runtime (and its DARSHAN_RUNTIME_ROOT) when this module
-- is unloaded: the library it preloaded is kept in a variable of its own, so that unloading
-- removes exactly it and leaves the user's own LD_PRELOAD entries.
local lib = (mode() == "unload" and os.getenv("IOSTACK_DARSHAN_PRELOAD"))
  or (os.getenv("DARSHAN_RUNTIME_ROOT") and pathJoin(os.getenv("DARSHAN_RUNTIME_ROOT"), "lib", "libdarshan.so"))
if lib then
  setenv("IOSTACK_DARSHAN_PRELOAD", lib)
  prepend_path("LD_PRELOAD", lib)
elseif mode() == "load" then
  LmodError("darshan-profile: darshan-runtime's module set no DARSHAN_RUNTIME_ROOT")
end
-- evaluated for the user who loads it; darshan-runtime writes its logs only into a directory
-- that exists. pushenv: unloading gives back the user's own setting, if any.
pushenv("DARSHAN_LOG_DIR_PATH", os.getenv("DARSHAN_LOG_DIR_PATH") or os.getenv("HOME"))
