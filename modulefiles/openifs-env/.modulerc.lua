-- 0.0.2 is the production version, as in seed 000.
module_version("openifs-env/0.0.2", "default")
