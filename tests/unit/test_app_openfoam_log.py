"""OpenFOAM solver log parsing, on a short simpleFoam log in the v1912 layout (made-up
numbers; the motorBike case of [OCI-OpenFOAM] solves U, p, k and omega)."""
import pytest

from iostack_rfm.jobs import openfoam

SIMPLEFOAM_LOG = """\
/*---------------------------------------------------------------------------*\\
| =========                 |                                                 |
| \\\\      /  F ield         | OpenFOAM: The Open Source CFD Toolbox           |
|  \\\\    /   O peration     | Version:  v1912                                 |
\\*---------------------------------------------------------------------------*/
Build  : _f3950763fe-20191219 OPENFOAM=1912
Exec   : simpleFoam -parallel
nProcs : 288
Create time

SIMPLE: convergence criteria
    field p	 tolerance 0.01
    field U	 tolerance 0.001

Starting time loop

Time = 1

smoothSolver:  Solving for Ux, Initial residual = 1, Final residual = 0.0538101, No Iterations 1
smoothSolver:  Solving for Uy, Initial residual = 1, Final residual = 0.0309254, No Iterations 2
smoothSolver:  Solving for Uz, Initial residual = 1, Final residual = 0.0329191, No Iterations 2
GAMG:  Solving for p, Initial residual = 1, Final residual = 0.0684271, No Iterations 17
time step continuity errors : sum local = 1.19733, global = 0.179883, cumulative = 0.179883
smoothSolver:  Solving for omega, Initial residual = 0.0028, Final residual = 0.000126, No Iterations 3
bounding omega, min: -26.7427 max: 1.08e+06 average: 4797.22
smoothSolver:  Solving for k, Initial residual = 1, Final residual = 0.0433, No Iterations 3
ExecutionTime = 4.56 s  ClockTime = 5 s

Time = 2

smoothSolver:  Solving for Ux, Initial residual = 0.0741, Final residual = 0.00312, No Iterations 3
smoothSolver:  Solving for Uy, Initial residual = 0.182, Final residual = 0.0101, No Iterations 3
smoothSolver:  Solving for Uz, Initial residual = 0.209, Final residual = 0.0112, No Iterations 3
GAMG:  Solving for p, Initial residual = 0.0542, Final residual = 0.000511, No Iterations 21
GAMG:  Solving for p, Initial residual = 0.00733, Final residual = 6.1e-05, No Iterations 9
time step continuity errors : sum local = 0.013, global = 0.00121, cumulative = 0.181093
smoothSolver:  Solving for omega, Initial residual = 0.0011, Final residual = 4.9e-05, No Iterations 3
smoothSolver:  Solving for k, Initial residual = 0.149, Final residual = 0.00701, No Iterations 3
ExecutionTime = 6.71 s  ClockTime = 8 s

Time = 3

smoothSolver:  Solving for Ux, Initial residual = 0.000912, Final residual = 4.1e-05, No Iterations 4
smoothSolver:  Solving for Uy, Initial residual = 0.000781, Final residual = 3.6e-05, No Iterations 4
smoothSolver:  Solving for Uz, Initial residual = 0.000655, Final residual = 3.2e-05, No Iterations 4
GAMG:  Solving for p, Initial residual = 0.00872, Final residual = 8.3e-05, No Iterations 14
GAMG:  Solving for p, Initial residual = 0.00151, Final residual = 1.4e-05, No Iterations 8
time step continuity errors : sum local = 0.0021, global = 0.000101, cumulative = 0.181194
smoothSolver:  Solving for omega, Initial residual = 0.00043, Final residual = 2.0e-05, No Iterations 2
smoothSolver:  Solving for k, Initial residual = 0.00091, Final residual = 4.4e-05, No Iterations 3
ExecutionTime = 8.93 s  ClockTime = 11 s


SIMPLE solution converged in 3 iterations

streamLine streamlines write:
    seeded 20 particles
    Tracks:20
    Total samples:11022

End

Finalising parallel run
"""


def test_simplefoam_log():
    log = openfoam.parse(SIMPLEFOAM_LOG)
    assert log.iterations == 3 and log.last_time == 3.0
    assert log.clock_seconds == 11.0 and log.execution_seconds == 8.93
    assert log.converged_at == 3
    assert log.finished
    assert sorted(log.residuals) == ["Ux", "Uy", "Uz", "k", "omega", "p"]
    p = log.residuals["p"]
    # two p solves (non-orthogonal correction): first initial, last final, iterations summed
    assert (p.initial, p.final, p.solver_iterations) == (0.00872, 1.4e-05, 22)
    assert log.residuals["Ux"].initial == 0.000912


def test_unfinished_unconverged_log():
    cut = SIMPLEFOAM_LOG.split("Time = 3")[0]
    log = openfoam.parse(cut)
    assert log.iterations == 2 and log.clock_seconds == 8.0
    assert log.converged_at is None and not log.finished
    assert log.residuals["p"].initial == 0.0542


def test_openfoam_org_time_with_unit():
    log = openfoam.parse("Time = 250s\n\nsmoothSolver:  Solving for Ux, Initial residual = 0.5, "
                         "Final residual = 0.01, No Iterations 2\nExecutionTime = 1.5 s  ClockTime = 2 s\n")
    assert log.last_time == 250.0 and log.residuals["Ux"].final == pytest.approx(0.01)
