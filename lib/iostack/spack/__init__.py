"""Spack as iostack runs it: the pinned Spack with the repository's configuration
(runner), its configuration files, the sites' lock files, source mirrors and build
caches."""
