"""The watchdog's report of a call that timed out, and the timeout a job gets."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tideflow.distributed import failure, world

ALL = (0, 1, 2, 3)


class _Answers:
    """Attendance answering from a table: rank -> its state (None: no answer)."""

    def __init__(self, table):
        self.table = table
        self.asked = None

    def ask(self, ranks, in_flight):
        self.asked = ranks
        return {r: self.table[r] for r in ranks}


def _in(*calls, last=None) -> dict:
    """A rank's answer: its blocking calls in flight, the last point it reached."""
    return {"calls": list(calls), "last": last}


def _report(table, call=("allgather", ALL)) -> tuple[str, _Answers]:
    answers = _Answers(table)
    dog = failure.Watchdog(5, rank=0, attendance=answers)
    try:
        return dog._not_finished(*call), answers
    finally:
        dog.stop()


def test_the_report_names_the_ranks_that_had_not_joined():
    text, answers = _report({1: _in(), 2: _in(("allgather", ALL)), 3: None})
    assert answers.asked == [1, 2, 3]
    assert text.splitlines() == [
        "tideflow: rank 0: allgather on ranks [0, 1, 2, 3] did not finish within 5 s: "
        "ranks [1, 3] had not joined it; aborting the job",
        "  rank 1: in no blocking call (computing, stalled, or somewhere else)",
        "  rank 3: did not answer (dead, or stuck outside Python)",
        "  ranks [2]: waiting in it too",
    ]


def test_a_rank_in_another_call_has_not_joined():
    text, _ = _report({1: _in(("bcast", (0, 1)))}, call=("allreduce", (0, 1)))
    assert "ranks [1] had not joined it" in text
    assert "  rank 1: in bcast on ranks [0, 1]" in text


def test_a_call_every_rank_is_in_says_so():
    text, _ = _report({1: _in(("barrier", (0, 1)))}, call=("barrier", (0, 1)))
    assert text.endswith("did not finish within 5 s: every rank of the group is in it; aborting "
                         "the job")  # fmt: skip


def test_a_rank_that_stopped_between_the_steps_of_a_collective_says_where():
    last = "mid_collective (all_gather_object, sizes exchanged)"
    text, _ = _report({1: _in(last=last), 2: _in(("allgather", ALL)), 3: _in(("allgather", ALL))})
    assert "ranks [1] had not joined it" in text
    assert f"  rank 1: in no blocking call (computing, stalled, or somewhere else); it was " \
        f"last at {last}" in text  # fmt: skip


def _timeout_of(script: str, **env: str) -> float:
    """The communication timeout a plain process running `script` (as MPI) ends up with."""
    code = textwrap.dedent(script) + textwrap.dedent(
        """
        from tideflow.distributed import mpi_backend
        print(json.dumps(mpi_backend._watch.timeout))
        """
    )
    plain = {k: v for k, v in os.environ.items() if k != world._TIMEOUT_VAR}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
        env={**plain, **env},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_without_a_timeout_a_generous_default_bounds_the_calls():
    script = """
        import json
        import tideflow.distributed as dist
        dist.init_process_group("mpi")
    """
    assert _timeout_of(script) == world.DEFAULT_TIMEOUT == 1800


def test_the_timeout_given_to_init_process_group_wins_over_the_environment():
    script = """
        import json
        from datetime import timedelta
        import tideflow.distributed as dist
        dist.init_process_group("mpi", timeout=timedelta(seconds=5))
    """
    assert _timeout_of(script, TIDEFLOW_COMM_TIMEOUT="7") == 5
