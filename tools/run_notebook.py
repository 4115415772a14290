"""
Run a notebook top to bottom and keep its outputs, as a reader sees them on GitHub:

    python tools/run_notebook.py notebooks/maze.ipynb                   # outputs written in place
    python tools/run_notebook.py notebooks/maze.ipynb --out /tmp/x.ipynb --set RL_STEPS=2

--set replaces a line `NAME = ...` of the cell tagged "parameters" (the tests run tiny values;
never commit such a run's outputs). Needs nbclient and ipykernel (requirements-dev.txt), not the
project itself. Deliberately left out: papermill's injected cells, other kernels than Python.
"""

import argparse
import os
import re
import sys
import time

import nbformat
from nbclient import NotebookClient


def with_parameters(nb, values):
    """The notebook with `NAME = value` set in its "parameters" cell; an unknown NAME fails."""
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    for name, value in values.items():
        pattern = re.compile(rf"^{name} = .*$", re.MULTILINE)
        if not pattern.search(cell.source):
            raise SystemExit(f"{name} is not set in the notebook's parameters cell")
        cell.source = pattern.sub(f"{name} = {value}", cell.source)
    return nb


def run(path, out=None, values=None, timeout=1200):
    """Execute `path` in its own folder's parent (the repository) -> the executed notebook."""
    nb = with_parameters(nbformat.read(path, as_version=4), values or {})
    t0 = time.time()
    NotebookClient(nb, timeout=timeout, kernel_name="python3").execute()
    nb.metadata["executed_in_seconds"] = round(time.time() - t0)
    text = nbformat.writes(nb)
    write_whole(out or path, text if text.endswith("\n") else text + "\n")  # as nbformat.write
    return nb


def write_whole(path, text):
    """The notebook written beside `path`, then renamed over it: a full disk leaves the old one
    whole and stops in one line (the project's runfiles.write_file, which this tool does not
    import)."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        words = os.strerror(e.errno) if e.errno else str(e)
        raise SystemExit(f"error: {words[0].lower()}{words[1:]}: {path}") from None
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebook")
    parser.add_argument("--out", help="where the executed notebook goes (default: in place)")
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    values = dict(item.split("=", 1) for item in args.set)
    nb = run(args.notebook, args.out, values)
    print(f"ran {args.notebook} in {nb.metadata['executed_in_seconds']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
