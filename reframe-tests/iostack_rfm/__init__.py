"""iostack's ReFrame library: mixins, fixtures and stdlib-only helpers used by the checks.

Modules that run inside a job (gribcompare, fdbconfig) use the standard library only, so
any python3 on a compute node can run them with `python3 -m iostack_rfm.<module>`.
"""
