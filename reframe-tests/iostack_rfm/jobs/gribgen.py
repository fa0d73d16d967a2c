"""A deterministic set of GRIB2 forecast fields with a MARS local section, encoded by the
environment's own ecCodes (`grib_filter` on its GRIB2 sample), so a check writes its input
with the tools of the stack under test and builds nothing.

The set mimics one OpenIFS output step sequence ([OIFS-HECToR]): pressure-level fields
(t, u, v, z) on several levels and surface fields (2t, msl), for several steps, on a regular
lat/lon grid, simple packing with 16 bits. Values are an analytic function of the field's
keys and grid point, so two runs write the same bytes and a retrieved field can be traced
back to its request. The fields, their order and their values are those of
reframe-tests/src/gribgen/gribgen.c (the same set through ecCodes' C API, which the OpenIFS
output comparison test compiles), and so are the bytes: tests/integration/test_gribgen.py
compares the two.

    python3 -m iostack_rfm.jobs.gribgen OUTPUT [NSTEPS [NLEVELS [NLAT NLON]]] [--count N]

prints `gribgen: messages=N bytes=B`; `--count N` writes the first N fields only. Standard
library only; grib_filter and codes_info come from PATH.
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys

PL_PARAMS = (130, 131, 132, 129)   # t, u, v, z
SFC_PARAMS = (167, 151)            # 2t, msl
LEVELS = (1000, 850, 700, 500, 250, 100)


def fields(nsteps: int, nlevels: int):
    """(levtype, paramId, level, step) of each field, in writing order."""
    for s in range(nsteps):
        step = 6 * s
        for param in PL_PARAMS:
            for level in LEVELS[:nlevels]:
                yield 'pl', param, level, step
        for param in SFC_PARAMS:
            yield 'sfc', param, 0, step


def values(nlat: int, nlon: int, param: int, level: int, step: int) -> list[float]:
    out = []
    for j in range(nlat):
        lat = 90.0 - 180.0 * j / (nlat - 1)
        for i in range(nlon):
            lon = 360.0 * i / nlon
            out.append(250.0 + 0.1 * param + 0.01 * level + step
                       + 20.0 * math.cos(lat * math.pi / 180.0)
                       * math.sin((lon + 5.0 * step) * math.pi / 180.0))
    return out


def rules(nsteps: int, nlevels: int, nlat: int, nlon: int, count: int | None = None):
    """grib_filter rules writing the set, as lines: the common keys once, then each field's
    (every value spelled exactly, as repr() does)."""
    yield ('set setLocalDefinition=1; set localDefinitionNumber=1; set class="od"; '
           'set type="fc"; set stream="oper"; set expver="0001"; set dataDate=20240101; '
           'set dataTime=0;')
    yield (f'set Ni={nlon}; set Nj={nlat}; set latitudeOfFirstGridPointInDegrees=90.0; '
           'set longitudeOfFirstGridPointInDegrees=0.0; '
           'set latitudeOfLastGridPointInDegrees=-90.0; '
           f'set longitudeOfLastGridPointInDegrees={360.0 - 360.0 / nlon!r}; '
           f'set iDirectionIncrementInDegrees={360.0 / nlon!r}; '
           f'set jDirectionIncrementInDegrees={180.0 / (nlat - 1)!r}; set bitsPerValue=16;')
    for n, (levtype, param, level, step) in enumerate(fields(nsteps, nlevels)):
        if count is not None and n >= count:
            return
        # typeOfLevel, not levtype: ecCodes 2.41 (Debian 13) refuses to set levtype on GRIB 2
        type_of_level = 'isobaricInhPa' if levtype == 'pl' else 'surface'
        yield (f'set typeOfLevel="{type_of_level}";'
               + (f' set level={level};' if levtype == 'pl' else '')
               + f' set paramId={param}; set step={step};')
        yield 'set values={' + ','.join(map(repr, values(nlat, nlon, param, level, step))) + '};'
        yield 'write;'


def sample() -> str:
    """The GRIB2 sample of the ecCodes on PATH."""
    out = subprocess.run(['codes_info', '-s'], capture_output=True, text=True, check=True)
    for directory in out.stdout.split()[-1].split(':'):
        path = os.path.join(directory, 'GRIB2.tmpl')
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f'no GRIB2.tmpl in ecCodes samples {out.stdout.strip()}')


def write(output: str, nsteps=3, nlevels=3, nlat=37, nlon=72, count=None) -> int:
    """Write the set to `output`; returns the number of messages."""
    if nsteps < 1 or not 1 <= nlevels <= len(LEVELS) or nlat < 2 or nlon < 2:
        raise ValueError(f'need NSTEPS>=1, 1<=NLEVELS<={len(LEVELS)}, NLAT,NLON>=2')
    # the rules (every value as text, several times the GRIB's size) reach grib_filter
    # through a pipe, never the disk the GRIB goes to
    text = ''.join(line + '\n' for line in rules(nsteps, nlevels, nlat, nlon, count))
    subprocess.run(['grib_filter', '-o', output, '/dev/stdin', sample()], input=text, text=True,
                   check=True)
    total = len(list(fields(nsteps, nlevels)))
    return total if count is None else min(count, total)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog='gribgen', description=__doc__.split('\n\n')[0])
    p.add_argument('output')
    p.add_argument('sizes', nargs='*', type=int, help='NSTEPS NLEVELS NLAT NLON')
    p.add_argument('--count', type=int, help='write the first COUNT fields only')
    args = p.parse_args(argv)
    if len(args.sizes) not in (0, 1, 2, 4):
        p.error('sizes: NSTEPS [NLEVELS [NLAT NLON]]')
    sizes = dict(zip(('nsteps', 'nlevels', 'nlat', 'nlon'), args.sizes, strict=False))
    try:
        n = write(args.output, count=args.count, **sizes)
    except (ValueError, OSError, subprocess.CalledProcessError) as e:
        print(f'gribgen: {e}', file=sys.stderr)
        return 2
    print(f'gribgen: messages={n} bytes={os.path.getsize(args.output)}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
