"""
Building a task from its config name: every task the project ships, in one place. A new task: write
its class (rewards.py shows the interface), add a line to TASKS.
"""

from codetask import CodeTask
from maze import MazeTask
from rewards import PersonaTask

# name -> (class, the options that make this task of it)
TASKS = {
    "persona": (PersonaTask, {}),
    # the control: personas that like each other's letters, nearly collinear rewards
    "persona_collinear": (PersonaTask, {"overlap": 0.9}),
    "code": (CodeTask, {}),
    # the VPO paper's own task: a route must choose the gold or the diamond corner
    "maze": (MazeTask, {}),
}


def make_task(name, **options):
    """Build a task from its config name; options are that task's constructor arguments."""
    if name not in TASKS:
        raise ValueError(f"unknown task '{name}' (choose {', '.join(TASKS)})")
    cls, preset = TASKS[name]
    return cls(**{**preset, **options})
