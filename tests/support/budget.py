"""How long a CI-tier test may wait on one program. CI has 90 minutes for set-up and every
tier (README: "CI as a fresh machine runs it"), so a wait planned on an hour never ends in its
own timeout: CI's limit ends the run first, and no test is named. tests/unit/test_timeouts.py
holds the CI tiers' timeouts to these."""

#: any one program a test of the integration or Spack tier waits on: at least 3 times the
#: longest such wait measured under CI's load (the fresh-bundle deploy, 577 s)
LONGEST_WAIT = 1800

#: the Spack tier's cold deploy of `local` from source (tests/spack/conftest.py), 1,380 to
#: 1,650 s in CI's runs beside the other worker (1,134 s on a faster VM)
COLD_DEPLOY = 2700
