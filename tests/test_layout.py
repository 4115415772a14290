"""The house rules, checked on the code itself: the reference (the top level: one run) never imports
the lab (lab/: many runs); every project import points up the README's table of files (a file uses
only files listed above it, so the table is a reading order), none sits inside a function; the idea
in one file (grpo_vs_vpo.py) imports only the model and a task; the line budgets a newcomer was
promised (the one file, every function, the README: budgets elsewhere made code pack); no
reference function takes more than 7 parameters, and a call names the arguments after its third;
and every random draw that takes a generator names the device it creates its tensor on, which must
be the generator's. The last rule catches, on a CPU-only machine, the bug class that only shows on
a GPU: a CUDA generator handed to a draw that makes a CPU tensor."""

import ast
import functools
import glob
import os
import random
import re
from pathlib import Path

import pytest
import torch

import evaluate
import evolve
import train
from config import make_task

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the reference
MODULES = {
    os.path.splitext(os.path.basename(p))[0]: p for p in glob.glob(os.path.join(ROOT, "*.py"))
}
LAB = sorted(glob.glob(os.path.join(ROOT, "lab", "*.py")))
SCRIPTS = sorted(glob.glob(os.path.join(ROOT, "tools", "*.py")))
TESTS = sorted(glob.glob(os.path.join(ROOT, "tests", "*.py")))


@functools.cache
def parsed(path):
    """The file's syntax tree, parsed once for every test of this file (none of them changes it)."""
    return ast.parse(Path(path).read_text())


def project_imports(path):
    """[(module imported, whether the import statement sits inside a function or class)]."""
    found = []

    def visit(node, inside):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                names = [a.name.split(".")[0] for a in child.names]
            elif isinstance(child, ast.ImportFrom) and child.module and not child.level:
                names = [child.module.split(".")[0]]
            else:
                names = []
            found.extend((n, inside) for n in names if n in MODULES)
            scope = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            visit(child, inside or isinstance(child, scope))

    visit(parsed(path), False)
    return found


def imports_of(path):
    """Every module name a file imports, the first part only ("lab" for `from lab import
    report`)."""
    names = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_no_project_module_is_imported_inside_a_function():
    late = [
        (path, name)
        for path in list(MODULES.values()) + LAB + SCRIPTS
        for name, inside in project_imports(path)
        if inside
    ]
    assert not late, late


def test_the_reference_never_imports_the_lab():
    """One run needs nothing of lab/ (or of tools/); the lab imports the reference."""
    wrong = [(name, path) for name, path in MODULES.items() if imports_of(path) & {"lab", "tools"}]
    assert not wrong, wrong


def long_functions(path, limit=60):
    return [
        (os.path.relpath(path, ROOT), node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(parsed(path))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_function_is_longer_than_60_lines_anywhere():
    found = [
        f for path in list(MODULES.values()) + LAB + SCRIPTS + TESTS for f in long_functions(path)
    ]
    assert not found, found


ONE_FILE = "grpo_vs_vpo"  # the idea in one file, read and run first


def parameters_of(node):
    """The parameters a function takes, `self` and `cls` aside."""
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return [n for n in names if n not in ("self", "cls")]


def test_no_reference_function_takes_more_than_7_parameters():
    """What travels together is one thing (a Policy, a task, a settings record), not a long list."""
    found = [
        (name, node.name, len(parameters_of(node)))
        for name, path in MODULES.items()
        for node in ast.walk(parsed(path))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and len(parameters_of(node)) > 7
    ]
    assert not found, found


def takes_varargs(module, name):
    """Whether module's top-level function `name` takes *args (its arguments are a list)."""
    for node in parsed(MODULES[module]).body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node.args.vararg is not None
    return False


def positional_calls(path):
    """Calls to a project function (a name the file defines or imports from the project, or
    module.name of an imported project module) that pass more than three arguments by position."""
    tree = parsed(path)
    project = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    modules = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module in MODULES:
            project |= {a.asname or a.name for a in node.names}
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names if a.name in MODULES}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or len(node.args) <= 3:
            continue
        if any(isinstance(a, ast.Starred) for a in node.args):
            continue
        func = node.func
        named = isinstance(func, ast.Name) and func.id in project
        qualified = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and (func.value.id in project or func.value.id in modules)
            and not (func.value.id in modules and takes_varargs(func.value.id, func.attr))
        )
        if named or qualified:
            found.append((os.path.basename(path), node.lineno, ast.unparse(func)))
    return found


def test_calls_name_the_arguments_after_the_third():
    """A reader sees what the fourth argument of a project function is without opening it."""
    found = [call for path in MODULES.values() for call in positional_calls(path)]
    assert not found, found


def test_project_imports_form_no_cycle():
    graph = {m: {n for n, _ in project_imports(p) if n != m} for m, p in MODULES.items()}
    state = {}

    def visit(m, path):
        state[m] = "open"
        for n in graph[m]:
            assert state.get(n) != "open", f"import cycle: {' -> '.join(path + [n])}"
            if n not in state:
                visit(n, path + [n])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [m])


def readme_order():
    """The top-level .py files in the order the README's table of files lists them."""
    names = []
    for line in Path(os.path.join(ROOT, "README.md")).read_text().splitlines():
        if line.startswith("| `"):
            first_cell = line.split("|")[1]
            names += [n for n in re.findall(r"`([a-z_]+)\.py`", first_cell) if n not in names]
    return names


def test_every_import_points_up_the_readme_table():
    order = readme_order()
    assert sorted(order) == sorted(MODULES), (
        f"README table vs files: {sorted(set(order) ^ set(MODULES))}"
    )
    rank = {name: i for i, name in enumerate(order)}
    wrong = [
        (m, n)
        for m, p in MODULES.items()
        for n, _ in project_imports(p)
        if n != m and rank[n] > rank[m]
    ]
    assert not wrong, f"imports of files listed below the importer in README.md: {wrong}"


RANDOM_FUNCTIONS = (
    "rand",
    "randn",
    "randint",
    "randperm",
    "multinomial",
    "bernoulli",
    "normal",
    "poisson",
)
RANDOM_METHODS = (
    "uniform_",
    "normal_",
    "random_",
    "exponential_",
    "geometric_",
    "cauchy_",
    "log_normal_",
    "bernoulli_",
)


@pytest.fixture
def draws(monkeypatch):
    """Record (function, generator device, device of the tensor made) for every draw given a
    generator. A draw that names no device makes a CPU tensor: recorded as None, which fails the
    check below, because with a CUDA generator it would crash on a GPU."""
    seen = []

    def wrap(fn, name, device_of):
        def wrapper(*args, **kwargs):
            if kwargs.get("generator") is not None:
                seen.append((name, kwargs["generator"].device, device_of(args, kwargs)))
            return fn(*args, **kwargs)

        return wrapper

    def named_device(args, kwargs):
        return torch.device(kwargs["device"]) if kwargs.get("device") is not None else None

    def input_device(args, kwargs):
        return (
            args[0].device
            if args and isinstance(args[0], torch.Tensor)
            else named_device(args, kwargs)
        )

    for name in RANDOM_FUNCTIONS:
        device_of = (
            input_device
            if name in ("multinomial", "bernoulli", "normal", "poisson")
            else named_device
        )
        monkeypatch.setattr(torch, name, wrap(getattr(torch, name), name, device_of))
    for name in RANDOM_METHODS:
        monkeypatch.setattr(
            torch.Tensor,
            name,
            wrap(getattr(torch.Tensor, name), name, lambda args, kwargs: args[0].device),
        )
    return seen


@pytest.mark.parametrize("algo", ["grpo", "vpo", "goal_conditioned"])
def test_every_random_draw_is_made_on_its_generators_device(tmp_path, draws, algo):
    cfg = train.resolve_config(
        os.path.join(ROOT, "configs", "tiny.yaml"),
        [
            f"out_dir={tmp_path}/run",
            f"warmstart_dir={tmp_path}/ws",
            "quiet=true",
            "steps=2",
            f"algo={algo}",
            "task=code",
            "sft_steps=4",  # every draw of the warm start's step, not its 80 repeats
        ],
    )
    out = train.train(cfg)  # warm start, RL steps, held-out evaluations
    path = os.path.join(out, "final.pt")
    task = make_task("code")
    problems = task.problems("heldout", 2, random.Random(0))
    evaluate.evaluate_checkpoint(path, task, problems, 6, seed=0)  # pools, held-out weightings
    policy, _ = evaluate.load_policy(path, m=1)
    settings = dict(train.EVALUATION, evo_budget=6, evo_islands=2)
    evolve.evolve_many(policy, task, problems[:1], settings, seed=0)
    # the sampler and the weightings were seen
    assert {name for name, _, _ in draws} >= {"rand", "randint"}

    def same(a, b):  # "cuda" (the current device) and "cuda:0" are one device on a one-GPU machine
        a, b = torch.device(a), torch.device(b)
        return a.type == b.type and (a.index or 0) == (b.index or 0)

    wrong = [(name, str(gen), str(made)) for name, gen, made in draws if not same(made, gen)]
    assert not wrong, (
        f"draws whose tensor is not made on the generator's device: {sorted(set(wrong))}"
    )


def readme_reading():
    """{file: its reading in the README's table: "first", "1", "2", "skip" or "run"}."""
    reading = {}
    for line in Path(os.path.join(ROOT, "README.md")).read_text().splitlines():
        cells = [c.strip() for c in line.split("|")]
        if line.startswith("| `") and len(cells) > 3 and re.fullmatch(r"`[a-z_]+\.py`", cells[1]):
            reading[cells[1].strip("`")[:-3]] = cells[2]
    return reading


def lines_of(names):
    return sum(len(Path(MODULES[n]).read_text().splitlines()) for n in names)


def test_the_one_file_is_read_first_and_stays_short():
    """The README's promise: the idea in one file of at most 400 formatted lines, read first, then
    the full trainer's core (reading 1). Only the one file has a budget of its own: the budgets of
    the whole top level and of a student's path made the trainer's code pack."""
    reading = readme_reading()
    assert set(reading) == set(MODULES)
    assert set(reading.values()) <= {"first", "1", "2", "skip", "run"}
    assert [n for n in readme_order() if reading[n] == "first"] == [ONE_FILE]
    assert lines_of([ONE_FILE]) <= 400
    assert [n for n in readme_order() if reading[n] == "1"] == [
        "grpo",
        "vpo",
        "rewards",
        "rollouts",
        "train",
    ]


def test_the_one_file_imports_only_the_model_and_a_task():
    """As CleanRL's ppo.py imports its environment and nothing of a trainer: sampling, the rewards,
    both advantages, the loss, the update and the loop are written out in the file itself."""
    imported = {name for name, _ in project_imports(MODULES[ONE_FILE])}
    assert imported <= {"model", "rewards"}, imported


def test_the_readme_reads_in_ten_minutes():
    """At most ~260 lines, at least a fifth of them commands or code, and the quick start, the idea
    and the exercises within its first 120 lines."""
    lines = Path(os.path.join(ROOT, "README.md")).read_text().splitlines()
    fenced, inside = 0, False
    for line in lines:
        if line.startswith("```"):
            inside = not inside
            fenced += 1
        elif inside:
            fenced += 1
    assert len(lines) <= 260 and fenced >= len(lines) / 5
    head = "\n".join(lines[:120]).lower()
    assert "quick start" in head and "idea" in head and "exercises.md" in head


def test_the_tour_visits_the_files_in_the_readme_order():
    """docs/TOUR.md's stops ("## 3. rewards.py ...") name the one file, then the files of readings
    1 and 2 in the table's order."""
    stops = re.findall(
        r"^## \d+\. `?([a-z_]+)\.py", Path(os.path.join(ROOT, "docs", "TOUR.md")).read_text(), re.M
    )
    reading = readme_reading()
    assert stops == [ONE_FILE] + [n for n in readme_order() if reading[n] == "1"] + [
        n for n in readme_order() if reading[n] == "2"
    ]


def test_every_file_under_docs_is_referenced():
    """Each file under docs/ is named by a document or a script of the tree (outside docs/figures):
    the file itself or, below docs/figures/, a folder holding it (what a documented command
    writes). A file no reader can reach goes; git history keeps it."""
    sources = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "__")) and d != "out"]
        if os.path.relpath(folder, ROOT).startswith(os.path.join("docs", "figures")):
            continue
        names = [f for f in files if f.endswith((".md", ".py", ".sh", ".yaml"))]
        sources += [Path(folder, f).read_text(errors="replace") for f in names]
    text = "\n".join(sources)

    def named(relpath):
        parts = relpath.split("/")
        shortest = 3 if parts[1] == "figures" else len(parts)  # docs/figures/<folder> at least
        prefixes = ["/".join(parts[:n]) for n in range(shortest, len(parts) + 1)]
        written = prefixes + [p.removeprefix("docs/") for p in prefixes]
        return any(re.search(re.escape(w) + r"(?![\w.-])", text) for w in written)

    files = [
        os.path.relpath(os.path.join(folder, f), ROOT).replace(os.sep, "/")
        for folder, _, names in os.walk(os.path.join(ROOT, "docs"))
        for f in names
    ]
    unnamed = sorted(f for f in files if not named(f))
    assert not unnamed, f"{len(unnamed)} files under docs/ that nothing names: {unnamed[:10]}"
