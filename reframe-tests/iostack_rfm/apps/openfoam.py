"""OpenFOAM checks' common part: case set-up commands (foamDictionary edits, a
decomposeParDict), solver steps, and what the sanity and performance functions read back
(solver logs through iostack_rfm.parsers.openfoam, case summaries through
iostack_rfm.apps.foamcase)."""
import re

import reframe.utility.sanity as sn

from iostack_rfm.apps import foamcase
from iostack_rfm.apps.base import AppCheck
from iostack_rfm.parsers import openfoam as foamlog


def foam_set(dictionary, entry, value):
    """Shell: set one entry of a case dictionary (the file is rewritten by OpenFOAM itself)."""
    return f'foamDictionary -entry {entry} -set "{value}" {dictionary} > /dev/null'


def foam_remove(dictionary, entry):
    return f'foamDictionary -entry {entry} -remove {dictionary} > /dev/null'


def decompose_par_dict(path, subdomains):
    """Shell: write a decomposeParDict for `subdomains` ranks (cases that have none): slabs
    along x, the `simple` method every OpenFOAM build has (Debian's lacks scotch)."""
    return (f"printf 'FoamFile\\n{{\\n    version 2.0;\\n    format ascii;\\n"
            f"    class dictionary;\\n    object decomposeParDict;\\n}}\\n"
            f"numberOfSubdomains {subdomains};\\nmethod simple;\\n"
            f"simpleCoeffs\\n{{\\n    n ({subdomains} 1 1);\\n    delta 0.001;\\n}}\\n' > {path}")


def summary_command(case, label, top=False):
    return (f'python3 -m iostack_rfm.apps.foamcase summary {case} --label {label}'
            + (' --top' if top else ''))


@sn.deferrable
def solver_log(path):
    with open(path) as f:
        return foamlog.parse(f.read())


@sn.deferrable
def converged_at(path):
    """The SIMPLE iteration the residual controls were met at (fails if they never were)."""
    log = solver_log(path).evaluate()
    if log.converged_at is None:
        raise ValueError(f'{path}: no "solution converged in N iterations" line')
    return log.converged_at


@sn.deferrable
def clock_seconds(path):
    log = solver_log(path).evaluate()
    if log.clock_seconds is None:
        raise ValueError(f'{path}: no ClockTime')
    return log.clock_seconds


@sn.deferrable
def residuals_above(path, limits):
    """Fields whose last initial residual is not below its residualControl limit
    ({field regex: limit}); [] when the run converged as the case asked."""
    log = solver_log(path).evaluate()
    above = []
    for pattern, limit in limits.items():
        matched = [f for f in log.residuals if re.fullmatch(pattern, f)]
        if not matched:
            above.append(f'{pattern}: not solved')
        above += [f'{f}={log.residuals[f].initial:g}>={limit:g}' for f in matched
                  if log.residuals[f].initial >= limit]
    return above


@sn.deferrable
def case_summaries(path):
    """{label: summary} from the job's `foamcase:` lines."""
    with open(path) as f:
        return {s['label']: s for s in (foamcase.parse_line(line) for line in f
                                        if line.startswith('foamcase:'))}


@sn.deferrable
def summary_value(path, label, key):
    summaries = case_summaries(path).evaluate()
    if label not in summaries:
        raise ValueError(f'no foamcase summary of {label} in {path}')
    return summaries[label][key]


class OpenFOAMCheck(AppCheck):
    """An OpenFOAM case run by steps; needs an environment with feature `openfoam`."""

    app_features = ['openfoam']

    def log_of(self, case, application):
        return f'{case}/log.{application}'

    def serial_step(self, name, case, application, *args):
        """A serial utility or solver run in the case, its output in log.<application>."""
        line = ' '.join([application, *args])
        return self.step(name, f'(cd {case} && {line} > log.{application} 2>&1)')

    def parallel_step(self, name, case, application, *args, log=None):
        """An MPI run of the case's decomposition (-parallel) with the job's ranks."""
        line = ' '.join([self.mpi_command(), application, '-parallel', *args])
        return self.step(name, f'(cd {case} && {line} > {log or "log." + application} 2>&1)')
