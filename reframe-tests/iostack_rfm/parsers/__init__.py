"""Parsers for the text the benchmarks and models print: io500, IOR, mdtest, OpenIFS
(ifs.stat and NODE.001_01) and OpenFOAM solver logs.

Standard library only and no ReFrame import, so checks, post-processing scripts and unit
tests can all use them.
"""
