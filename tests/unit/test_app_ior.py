"""What an IOR or mdtest run must show for the IOR/mdtest checks to count it (the run asked
for: tasks, layout, sizes, repetitions; no data errors). Samples are laid out like IOR 4.0's
and mdtest 4.0's output, numbers made up."""
import pytest

from iostack_rfm import ior

HEADER = ("Operation   Max(MiB)   Min(MiB)  Mean(MiB)     StdDev   Max(OPs)   Min(OPs)  Mean(OPs)"
          "     StdDev    Mean(s) Stonewall(s) Stonewall(MiB) Test# #Tasks tPN reps fPP reord"
          " reordoff reordrand seed segcnt   blksiz    xsize aggs(MiB)   API RefNum")


def ior_output(tasks=256, fpp=1, reps=3, api="POSIX", aggregate="262144.0", extra=""):
    row = ("{op:<9} 10000.00 9000.00 9500.00 400.00 10000.00 9000.00 9500.00 400.00 27.59 NA NA"
           f" 0 {tasks} 128 {reps} {fpp} 1 1 0 0 1 1073741824 1048576 {aggregate} {api} 0")
    return ("IOR-4.0.0: MPI Coordinated Test of Parallel I/O\n" + extra
            + "Max Write: 10000.00 MiB/sec (10485.76 MB/sec)\n"
            + "Max Read:  10000.00 MiB/sec (10485.76 MB/sec)\n\nSummary of all tests:\n"
            + HEADER + "\n" + row.format(op="write") + "\n" + row.format(op="read") + "\n"
            + "Finished            : Tue Mar  5 10:00:41 2024\n")


EXPECTED = dict(tasks=256, file_per_process=True, block="1g", segments=1, repetitions=3,
                api="POSIX")


def test_a_run_as_asked_passes():
    assert ior.ior_problems(ior_output(), **EXPECTED) == []
    assert ior.ior_problems(ior_output(fpp=0, api="MPIIO"),
                            **{**EXPECTED, "file_per_process": False, "api": "MPIIO"}) == []


@pytest.mark.parametrize("change,problem", [
    (dict(tasks=128, aggregate="131072.0"), "#Tasks=128"),
    (dict(fpp=0), "fPP=0"),
    (dict(reps=1), "reps=1"),
    (dict(aggregate="131072.0"), "aggs(MiB)=131072.0"),
    (dict(api="MPIIO"), "API MPIIO"),
    (dict(extra="WARNING: Incorrect data on write (4 errors found).\n"), "data errors"),
])
def test_a_run_not_as_asked_is_named(change, problem):
    problems = ior.ior_problems(ior_output(**change), **EXPECTED)
    assert any(problem in p for p in problems), problems


def test_missing_summary():
    assert ior.ior_problems("IOR-4.0.0\n", **EXPECTED) == ["0 write summary rows",
                                                           "0 read summary rows"]


def test_sizes():
    assert ior.size_bytes("1g") == 1 << 30
    assert ior.size_bytes("47008") == 47008
    assert ior.size_bytes("2m") == 2 << 20
    with pytest.raises(ValueError):
        ior.size_bytes("1 GiB")


MDTEST = """\
mdtest-4.0.0 was launched with 64 total task(s) on 2 node(s)
Command line used: mdtest '-F' '-n' '1000' '-i' '3' '-u' '-d' '/lus/scratch/md'
64 tasks, 64000 files

SUMMARY rate: (of 3 iterations)
   Operation                     Max            Min           Mean        Std Dev
   ---------                     ---            ---           ----        -------
   File creation               21301.223      19987.101      20620.446        658.904
   File stat                  120334.871     119876.012     120101.339        229.610
   File read                   65120.500      64877.003      65002.660        121.803
   File removal                26010.302      25801.447      25899.015        104.776
   Tree creation                 612.311        590.200        601.010         11.064
   Tree removal                  401.227        388.910        394.312          6.290
"""


def test_mdtest_counts_tasks_files_iterations_and_rates():
    assert ior.mdtest_problems(MDTEST, tasks=64, files_per_task=1000, iterations=3) == []
    assert ior.mdtest_problems(MDTEST, tasks=64, files_per_task=100, iterations=3) == [
        "64 tasks and 64000 files, expected 64 and 6400"]
    assert ior.mdtest_problems(MDTEST, tasks=64, files_per_task=1000, iterations=1) == [
        "3 iterations summarised, expected 1"]
    no_read = MDTEST.replace("   File read ", "   File reed ")
    assert "no File read rate" in ior.mdtest_problems(no_read, tasks=64, files_per_task=1000,
                                                      iterations=3)
