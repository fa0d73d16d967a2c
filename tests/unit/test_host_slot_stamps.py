"""The host slot's stamps (iostack_rfm.parsers.slots): the intervals a job held the slot, and the
jobs that kept a timed one company. The commands themselves run in
tests/integration/test_host_slot.py."""
from iostack_rfm.parsers import slots

TIMED = ("host-slot: shared from 10.0\nsome output\nhost-slot: waiting from 10.1\n"
         "host-slot: exclusive from 14.0\nhost-slot: released at 20.0\n")
UNTIMED = "host-slot: shared from {}\nhost-slot: released at {}\n"


def test_a_timed_job_holds_shared_then_exclusive_and_nothing_while_waiting():
    assert slots.held(TIMED) == [("shared", 10.0, 10.1), ("exclusive", 14.0, 20.0)]
    assert slots.held(UNTIMED.format(1, 2)) == [("shared", 1.0, 2.0)]
    assert slots.held("no stamps\n") == []


def test_company_is_any_job_holding_the_slot_while_a_timed_one_measures():
    alone = {"timed": TIMED, "before": UNTIMED.format(9.0, 14.0),
             "after": UNTIMED.format(20.0, 25.0)}
    assert slots.company(alone, ["timed"]) == []
    crowded = {**alone, "beside": UNTIMED.format(15.0, 16.0)}
    assert slots.company(crowded, ["timed"]) == [
        "beside held the host (shared, 15.000 to 16.000) while timed measured "
        "(14.000 to 20.000)"]
    # a timed job that never took the slot to itself measured all the while it held it
    untaken = {"timed": UNTIMED.format(10.0, 20.0), "beside": UNTIMED.format(11.0, 12.0)}
    assert len(slots.company(untaken, ["timed"])) == 1
