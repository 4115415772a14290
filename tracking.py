"""
Curves while a run trains: each metrics.jsonl line, as it is written, also goes to TensorBoard or
trackio (report_to), so many runs sit side by side in one view. Off by default; a student can skip
this file. runfiles.RunFiles feeds it on rank 0 only; the lab sends it the finished runs it reuses
(lab/experiment.show_finished), so they join the view too.

Where: one folder for many runs, report_dir, by default `tracking/` beside the run's folder (out/
for train.py's runs, <out_dir>/runs/ for a lab command's), holding tensorboard/<run>/ and trackio/
(one trackio project, PROJECT, in its own store). A run is named by its folder: task-algo-s<seed>.
What: every number of every line, under its kind (train/entropy, eval/heldout_scalar), a list one
number per component (train/reward_per_component/0, /1, ...), at the line's step; and the run's
config once (a TensorBoard text summary, trackio's run config).
A resumed run must not log a step twice: each start writes its curves afresh (a run of the same
name there is removed) and replays the lines metrics.jsonl kept, then logs on from there.
Left out: timing.jsonl and samples, media, hyperparameter search views, wandb (trackio is its
offline twin: a local store and a local dashboard, `trackio show`), a tracker's own servers.
"""

import contextlib
import io
import json
import os
import shutil
import sys

from config import ConfigError, trackers

PROJECT = "vpo-mini"  # trackio's project: one per store, and a store per report_dir


def report_dir(cfg, out_dir):
    """The folder a run's curves go to, shared with the runs beside it."""
    return cfg["report_dir"] or os.path.join(os.path.dirname(os.path.normpath(out_dir)), "tracking")


def scalars(record):
    """A metrics.jsonl line -> {name: number}: every number in it under its kind, a list's items
    one by one; its kind, its step and anything not a number left out."""
    found = {}
    for key, value in record.items():
        if key in ("kind", "step"):
            continue
        name = f"{record['kind']}/{key}"
        if isinstance(value, list):
            items = [(f"{name}/{i}", v) for i, v in enumerate(value)]
        else:
            items = [(name, value)]
        for item, v in items:
            if isinstance(v, (int, float)):  # a bool counts as 0 or 1
                found[item] = float(v)
    return found


def config_table(config):
    """The run's settings as a Markdown table (TensorBoard's text tab renders it)."""
    rows = [f"| {key} | {json.dumps(value)} |" for key, value in config.items()]
    return "\n".join(["| setting | value |", "| --- | --- |", *rows])


class TensorBoard:
    """The run's event files in <report_dir>/tensorboard/<run>/."""

    def __init__(self, folder, name, config):
        from torch.utils.tensorboard import SummaryWriter

        logdir = os.path.join(folder, "tensorboard", name)
        shutil.rmtree(logdir, ignore_errors=True)  # a run's curves are written afresh
        self.view = f"tensorboard --logdir {os.path.join(folder, 'tensorboard')}"
        self.writer = SummaryWriter(logdir)
        self.writer.add_text("config", config_table(config))

    def log(self, values, step):
        for name, value in values.items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()  # on disk as the step ends, not two minutes later

    def close(self):
        self.writer.close()


class Trackio:
    """The run in the trackio store <report_dir>/trackio/, project PROJECT."""

    def __init__(self, folder, name, config):
        store = os.path.abspath(os.path.join(folder, "trackio"))
        imported = "trackio" in sys.modules
        # trackio reads its store's folder from TRACKIO_DIR once, as it is imported
        os.environ["TRACKIO_DIR"] = store
        import trackio

        if imported and os.path.abspath(trackio.utils.TRACKIO_DIR) != store:
            raise ConfigError(
                f"trackio writes to one folder per process, here {trackio.utils.TRACKIO_DIR}; "
                f"this run's report_dir needs {store} (run it in a new process)"
            )
        os.makedirs(store, exist_ok=True)
        # its console lines (where it logs, how to open it) would break quiet=true
        with contextlib.redirect_stdout(io.StringIO()):
            # a run this process left unfinished (stopped by an exception) writes what it holds now,
            # not into the curves begun below
            with contextlib.suppress(RuntimeError):
                trackio.finish()
            try:
                earlier = list(trackio.Api().runs(PROJECT))
            except ValueError:  # no project in this store yet
                earlier = []
            for run in earlier:
                if run.name == name:  # a run's curves are written afresh
                    run.delete()
            trackio.init(
                project=PROJECT,
                name=name,
                config=config,
                resume="never",
                embed=False,
                auto_log_cpu=False,
                auto_log_gpu=False,
            )
        self.trackio = trackio
        self.view = f"TRACKIO_DIR={store} trackio show --project {PROJECT}"

    def log(self, values, step):
        self.trackio.log(values, step=step)

    def close(self):
        with contextlib.redirect_stdout(io.StringIO()):
            self.trackio.finish()


TRACKERS = {"tensorboard": TensorBoard, "trackio": Trackio}


class Tracking:
    """The trackers report_to asks for, fed each metrics.jsonl line."""

    def __init__(self, cfg, out_dir, config):
        folder = report_dir(cfg, out_dir)
        name = os.path.basename(os.path.normpath(out_dir))
        self.trackers = [TRACKERS[t](folder, name, config) for t in trackers(cfg["report_to"])]
        self.where = f"{', '.join(trackers(cfg['report_to']))} in {folder} as {name}"
        self.view = " and ".join(tracker.view for tracker in self.trackers)

    def replay(self, path):
        """Log every line of a metrics.jsonl: what a resumed run kept, or a finished run whole."""
        with open(path) as f:
            for line in f:
                self.log(json.loads(line))

    def log(self, record):
        values = scalars(record)
        for tracker in self.trackers:
            tracker.log(values, record["step"])

    def close(self):
        for tracker in self.trackers:
            tracker.close()
