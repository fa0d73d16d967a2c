"""What an IOR or mdtest run must show for the IOR/mdtest checks to count it (the run asked
for: tasks, layout, sizes, repetitions; no data errors). IOR: real IOR 4.0.0 runs on this
kind of node (tests/data/ior: 2 tasks, 4 MiB blocks, 3 repetitions; corrupt: a file changed
between its write and its verified read); the wrong runs change one field of a real one."""
import json
import pathlib

import pytest

from iostack_rfm.parsers import ior

DATA = pathlib.Path(__file__).parents[1] / "data" / "ior"
EXPECTED = dict(tasks=2, file_per_process=True, block="4m", segments=1, repetitions=3,
                api="POSIX")


def sample(name):
    return (DATA / f"{name}.json").read_text(), (DATA / f"{name}.out").read_text()


def test_a_run_as_asked_passes():
    assert ior.ior_problems(*sample("posix-fpp"), **EXPECTED) == []
    assert ior.ior_problems(*sample("mpiio-shared"),
                            **{**EXPECTED, "file_per_process": False, "api": "MPIIO"}) == []


def changed(operation, key, value):
    data = json.loads(sample("posix-fpp")[0])
    for row in data["summary"]:
        if row["operation"] == operation:
            row[key] = value
    return json.dumps(data)


@pytest.mark.parametrize("key,value,problem", [
    ("numTasks", 4, "write numTasks=4, expected 2"),
    ("filePerProc", 0, "write filePerProc=0, expected 1"),
    ("repetitions", 1, "write repetitions=1, expected 3"),
    ("xsizeMiB", 4.0, "write xsizeMiB=4.0, expected 8.0"),
    ("API", "MPIIO", "write API MPIIO, expected POSIX"),
])
def test_a_run_not_as_asked_is_named(key, value, problem):
    assert ior.ior_problems(changed("write", key, value), sample("posix-fpp")[1],
                            **EXPECTED) == [problem]


def test_data_errors_are_named():
    summary, output = sample("corrupt")
    assert "WARNING: Incorrect data on read (1 errors found)." in output
    assert ior.ior_problems(summary, output, **{**EXPECTED, "repetitions": 1}) == [
        "IOR reported data errors", "no write summary"]


def test_a_missing_or_broken_summary_is_named():
    assert ior.ior_problems("", "", **EXPECTED)[0].startswith("not IOR's JSON summary")
    assert ior.ior_problems('{"Version": "4.0.0"}', "", **EXPECTED) == [
        "IOR's JSON summary lacks 'tests'"]


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
