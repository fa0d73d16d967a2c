-- 0.0.2 is the production version, as in [OIFS-HECToR].
module_version("openifs-env/0.0.2", "default")
