"""lab/scale_out.py: the critical path and the list schedule on a board small enough to do by hand,
a run log's job times, and the voting board's jobs counted as its own log counts them."""

import os

from lab import scale_out

A, B, C = ("warm", ("code", 0)), ("train", ("code", "vpo", 0)), ("pools", ("persona", "grpo", 1))
SECONDS = {A: 3.0, B: 5.0, C: 4.0}
NEEDS = {A: [], B: [A], C: []}  # the run waits for its warm start; the other seed's pools do not


def test_the_critical_path_is_the_longest_chain_of_waiting_jobs():
    assert scale_out.critical_path(SECONDS, NEEDS) == (8.0, [A, B])


def test_the_makespan_by_hand():
    assert scale_out.makespan(SECONDS, NEEDS, 1) == 12.0  # one node: every job in turn
    # two nodes: the pools (4) and the warm start (3) at once, then the run from 3 to 8
    assert scale_out.makespan(SECONDS, NEEDS, 2) == 8.0
    assert scale_out.makespan(SECONDS, NEEDS, 16) == 8.0  # the critical path, whatever the nodes


def test_a_logs_job_times_and_the_longest_a_progress_line_saw(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(
        "[   351s] warm start code/0 ready (351s)\n"
        "[   400s] 3 jobs done, 2 waiting; running: pools code/vpo/0 12s of ~3s planned, "
        "train code/grpo/0 step 5/400; about 1.0 min left\n"
        "[   430s] 3 jobs done, 2 waiting; running: pools code/vpo/0 42s of ~3s planned\n"
        "[  1790s] trained code/vpo/0 (1439s)\n"
    )
    ended, seen = scale_out.read_log(str(log))
    assert ended == {("warm", ("code", 0)): 351.0, ("train", ("code", "vpo", 0)): 1439.0}
    assert seen == {("pools", ("code", "vpo", 0)): 42.0}


def test_the_voting_boards_jobs_are_the_ones_its_log_counts():
    log = os.path.join(scale_out.VOTING, "run.log")
    methods, tasks, seeds = scale_out.plan_of(log)
    assert (methods, tasks, seeds) == (
        ["grpo", "vpo", "grpo_x3"],
        ["code", "maze", "persona"],
        [0, 1, 2],
    )
    # its last progress line: "110 jobs done, 0 waiting; running: search_set code/vpo/2"
    assert len(scale_out.board_jobs(methods, tasks, seeds, lambda a, s: True)) == 111
