"""A disk that fails on purpose, in the manner of SQLite's I/O-error tests: every call that writes
under one folder is counted, and the n-th raises OSError (ENOSPC by default, as a full disk; EIO
as a failing one). A counting run (fail_at=None) learns how many write calls a command makes and
where; a test then fails each n in turn and checks what the command said and left on disk.

The calls counted: open() for writing (it may create a file), a file's write() and flush(),
os.fsync, os.replace, os.rename, os.truncate and os.mkdir. A failing write() of a full disk first
writes half of its bytes, as a real one does when the last blocks run out. Left out: os.remove and
os.rmdir (they free space), torch.save (runfiles serializes into memory, then writes the bytes with
the calls above: torch never touches the disk), writes that C libraries make without Python's open
(TensorBoard's event files, trackio's database: tracking is off by default).
"""

import builtins
import errno
import os
import sys
import time
from contextlib import contextmanager

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# runfiles' write functions: a call's site is the line that called them, not their own lines
HELPERS = {
    "writing",
    "write_file",
    "write_json",
    "atomic_save",
    "save_figure",
    "open_lines",
    "append_line",
}


class Call:
    """One write call: what it was, the file it wrote (a per-process temporary file is named as the
    file it becomes) and the project line that asked for it."""

    def __init__(self, primitive, path, site, file):
        self.primitive, self.path, self.site = primitive, path, site
        self.file = file  # its real path

    def __repr__(self):
        return f"{self.primitive} {self.path} from {self.site}"


def project_site():
    """file.py:function (its qualified name: Lock.__init__) of the innermost project frame outside
    these helpers and runfiles' write functions: the place in the code that wrote."""
    frame = sys._getframe(2)
    while frame is not None:
        file, name = frame.f_code.co_filename, frame.f_code.co_name
        if file.startswith(ROOT) and not file.startswith(HERE) and name not in HELPERS:
            return f"{os.path.relpath(file, ROOT)}:{frame.f_code.co_qualname}"
        frame = frame.f_back
    return "elsewhere"


class FailingDisk:
    """Counts the write calls under `root`; the `fail_at`-th (1-based; None: none) raises
    OSError(err) naming its file. calls: every Call so far; failed: the Call that raised."""

    def __init__(self, root, fail_at=None, err=errno.ENOSPC, fail_on=None):
        self.root = os.path.realpath(root)
        self.fail_at, self.err = fail_at, err
        self.fail_on = fail_on  # or: the first call on a file whose path ends so fails
        self.calls, self.failed = [], None
        self.fds = set()  # descriptors of the files opened for writing under root
        self.fds_path = {}  # and the file each one writes
        self.before = None  # {file under root: its bytes} as the failing call began

    def under(self, path):
        try:
            path = os.path.realpath(os.fspath(path))
        except TypeError:  # a descriptor, not a path
            return False
        return path == self.root or path.startswith(self.root + os.sep)

    def next_fails(self, path=None):
        """Is the next call the one to fail? Then what is on disk now is what it must leave."""
        fails = self.fail_at is not None and len(self.calls) + 1 == self.fail_at
        if self.fail_on and path is not None and self.failed is None:
            fails = strip_tmp(os.path.realpath(path)).endswith(self.fail_on)
        if fails and self.before is None:
            self.before = files_under(self.root)
        return fails

    def call(self, primitive, path):
        """Count one call; raise if it is the one to fail."""
        fails = self.next_fails(path)
        file = strip_tmp(os.path.realpath(path))
        shown = os.path.relpath(file, os.path.dirname(self.root))
        self.calls.append(Call(primitive, shown, project_site(), file))
        if fails:
            self.failed = self.calls[-1]
            raise OSError(self.err, os.strerror(self.err), os.fspath(path))

    @contextmanager
    def installed(self):
        """The disk in place of the real one's write calls, for the `with` block."""
        real = {
            name: getattr(os, name) for name in ("fsync", "replace", "rename", "truncate", "mkdir")
        }
        real_open = builtins.open
        disk = self

        def open_(file, mode="r", *args, **kwargs):
            writes = any(c in mode for c in "wax+")
            if not (writes and disk.under(file)):
                return real_open(file, mode, *args, **kwargs)
            disk.call("open", file)
            f = real_open(file, mode, *args, **kwargs)
            disk.fds.add(f.fileno())
            return FailingFile(disk, f, os.fspath(file))

        def fsync(fd):
            if fd in disk.fds:
                disk.call("fsync", disk.fds_path.get(fd, "?"))
            return real["fsync"](fd)

        def moved(name):
            def move(src, dst, *args, **kwargs):
                if disk.under(dst):
                    disk.call(name, dst)
                return real[name](src, dst, *args, **kwargs)

            return move

        def truncate(path, length):
            if disk.under(path):
                disk.call("truncate", path)
            return real["truncate"](path, length)

        def mkdir(path, *args, **kwargs):
            if disk.under(path) and not os.path.isdir(path):
                disk.call("mkdir", path)
            return real["mkdir"](path, *args, **kwargs)

        patched = {
            "fsync": fsync,
            "replace": moved("replace"),
            "rename": moved("rename"),
            "truncate": truncate,
            "mkdir": mkdir,
        }
        for name, fn in patched.items():
            setattr(os, name, fn)
        builtins.open = open_
        try:
            yield self
        finally:
            builtins.open = real_open
            for name, fn in real.items():
                setattr(os, name, fn)


class FailingFile:
    """A file opened for writing on a FailingDisk: write and flush are counted; the rest is the
    file's own."""

    def __init__(self, disk, file, path):
        self._disk, self._file, self._path = disk, file, path
        disk.fds_path[file.fileno()] = path

    def write(self, data):
        if self._disk.next_fails(self._path) and self._disk.err == errno.ENOSPC and len(data) > 1:
            self._file.write(data[: len(data) // 2])  # the blocks that were left
            self._file.flush()
        self._disk.call("write", self._path)
        return self._file.write(data)

    def flush(self):
        self._disk.call("flush", self._path)
        return self._file.flush()

    def close(self):
        if not self._file.closed:
            self._disk.fds.discard(self._file.fileno())
        return self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __iter__(self):
        return iter(self._file)

    def __getattr__(self, name):
        return getattr(self._file, name)


def strip_tmp(path):
    """A per-process temporary file's path -> the file it becomes (runfiles.write_file)."""
    head, _, tail = path.rpartition(f".{os.getpid()}.tmp")
    return head if tail == "" and head else path


def files_under(root):
    """{path relative to root: its bytes} of every file under root."""
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, root)] = f.read()
    return found


def write_sites(calls):
    """The distinct places in the code that wrote: {site: [the file names it wrote]}."""
    sites = {}
    for c in calls:
        names = sites.setdefault(c.site, [])
        if os.path.basename(c.path) not in names:
            names.append(os.path.basename(c.path))
    return sites


def one_line(stderr):
    """The error line a command printed, and whether it printed nothing else (no traceback)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return (lines[-1] if lines else ""), len(lines) == 1


# ---- Jobs for the lab's workers (lab/workers.run_jobs), importable in a spawned process ----


def job_returns(value):
    return value


def job_on_full_disk(folder, after_s):
    """A job that finds its disk full `after_s` seconds in: runfiles' WriteError, from a worker."""
    import runfiles  # in the worker: the project's write

    time.sleep(after_s)
    with FailingDisk(folder, fail_at=1).installed():
        runfiles.write_file(os.path.join(folder, "result.json"), "{}")


if __name__ == "__main__":  # python tests/faults.py: nothing to run; the tests use it
    sys.exit("tests/faults.py is a helper of tests/test_full_disk.py")
