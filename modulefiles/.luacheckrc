-- Lmod modulefile functions, for luacheck.
std = "lua51"
read_globals = {
  "whatis", "help", "family", "load", "try_load", "isAvail", "isloaded", "isFile", "isDir",
  "setenv", "pushenv", "unsetenv", "prepend_path", "append_path", "remove_path",
  "pathJoin", "myFileName", "myModuleName", "myModuleVersion", "module_version",
  "conflict", "prereq", "depends_on", "mode", "LmodError", "LmodMessage", "os",
}
