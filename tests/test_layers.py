"""Layers point down: timeseries/ (data types) and model/ import nothing above them, the
packages of model/ import nothing of those above them (MODEL_LAYERS), no two modules of model/
import each other (through others or directly), the rollout's kernels (model/runtime/kernels/)
import nothing else of the runtime, and the service starts without the training code (the
serving images copy no training/).

Every import counts, wherever it is: at the top of a module, in a function, under
TYPE_CHECKING. An import deferred into a function is still a dependency at run time (a cycle
that only works because one side imports late), and one under TYPE_CHECKING ties a module to
another's types: a cycle hidden either way is still a cycle, and is broken by moving what both
need below them."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# a fresh interpreter in which `training` cannot be imported, as in the serving image
BLOCK_TRAINING = """
import importlib.abc, sys
class NoTraining(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "training" or name.startswith("training."):
            raise ImportError(f"{name} is not in the serving image")
sys.meta_path.insert(0, NoTraining())
"""


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module.split(".")[0])
    return out


@pytest.mark.parametrize(
    "package, above",
    [
        ("timeseries", {"model", "training", "service", "cli"}),
        ("model", {"training", "service", "cli"}),
        ("service", {"training", "cli"}),
    ],
)
def test_a_layer_imports_nothing_above_it(package: str, above: set[str]) -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_packages(path) & above)
        for path in sorted((ROOT / package).rglob("*.py"))
        if _imported_packages(path) & above
    }
    assert offenders == {}


# the packages of model/ from the bottom up (model/__init__.py): a module imports only from its
# own package and those before it
MODEL_LAYERS = ("network", "filtering", "series", "artifacts", "baselines", "runtime")


def _import_names(source: str, here: list[str]) -> list[tuple[str, str]]:
    """Each name `source` imports, wherever the import is (in a function, under
    TYPE_CHECKING), with the module it is taken from (`from p import x`: p.x and p; `import p`:
    p and p); relative imports resolved from the package `here`."""
    out: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(alias.name, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x, from .x import y, from .. import x
                parent = here[: len(here) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            out += [(f"{base}.{alias.name}", base) for alias in node.names]
    return out


def _model_packages(source: str, package: str) -> set[str]:
    """The packages of model/ that a module of model.`package` imports, wherever the import
    is (in a function, under TYPE_CHECKING); relative imports resolved."""
    names = [name for name, _ in _import_names(source, ["model", package])]
    return {n.split(".")[1] for n in names if n.startswith("model.") and n.count(".")}


def _model_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "model").rglob("*.py") if p != ROOT / "model" / "__init__.py")


def test_every_model_module_is_in_a_layer() -> None:
    assert {p.relative_to(ROOT / "model").parts[0] for p in _model_modules()} == set(MODEL_LAYERS)


def test_a_model_package_imports_nothing_above_it() -> None:
    offenders = {}
    for path in _model_modules():
        package = path.relative_to(ROOT / "model").parts[0]
        above = set(MODEL_LAYERS[MODEL_LAYERS.index(package) + 1 :])
        found = _model_packages(path.read_text(), package) & above
        if found:
            offenders[str(path.relative_to(ROOT))] = sorted(found)
    assert offenders == {}


def test_the_layer_check_sees_every_form_of_import() -> None:
    source = (
        "import model.series.state\n"
        "from model.filtering import noise\n"
        "from model import artifacts\n"
        "from . import forecasting\n"
        "from ..network.config import ModelConfig\n"
        "def f():\n"
        "    from model.baselines.registry import names\n"
        "import torch\n"
    )
    assert _model_packages(source, "runtime") == {
        "series", "filtering", "artifacts", "runtime", "network", "baselines"
    }


# --------------------------------------------------------------------------- the modules of model/


def _module_name(path: Path) -> str:
    """model/series/state.py -> model.series.state; a package's __init__.py -> its name."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported_modules(source: str, module: str, package: bool, known: set[str]) -> set[str]:
    """The modules of `known` that `source`, the module `module` (a package's __init__ where
    `package`), imports, wherever the import is; relative imports resolved, `from p import x`
    read as the module p.x where there is one, else as p."""
    here = module.split(".") if package else module.split(".")[:-1]
    out: set[str] = set()
    for imported, base in _import_names(source, here):
        parts = (imported if imported in known else base).split(".")
        found = next(
            (".".join(parts[:i]) for i in range(len(parts), 0, -1)
             if ".".join(parts[:i]) in known),
            None,
        )
        if found is not None and found != module:
            out.add(found)
    return out


def _model_imports() -> dict[str, set[str]]:
    """Each module of model/ (packages too) -> the modules of model/ it imports."""
    paths = {_module_name(p): p for p in sorted((ROOT / "model").rglob("*.py"))}
    known = set(paths)
    return {
        name: _imported_modules(path.read_text(), name, path.name == "__init__.py", known)
        for name, path in paths.items()
    }


def _reached(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules `start` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, through others or directly (strongly
    connected components of more than one module), each sorted."""
    reach = {v: _reached(graph, v) for v in graph}
    groups = {
        tuple(sorted(w for w in reach[v] if v in reach.get(w, ()))) for v in graph if v in reach[v]
    }
    return sorted(list(g) for g in groups if len(g) > 1)


def test_the_cycle_check_sees_every_form_of_import() -> None:
    known = {"model.a", "model.a.b", "model.a.c", "model.a.d", "model.e"}
    source = (
        "from model.a import c\n"
        "from . import d\n"
        "def f():\n"
        "    from ..e import thing\n"
        "if TYPE_CHECKING:\n"
        "    import model.a.b.inner\n"
        "import torch\n"
    )
    assert _imported_modules(source, "model.a.b", False, known) == {
        "model.a.c", "model.a.d", "model.e"
    }
    assert _imported_modules(source, "model.a.x", False, known) == {
        "model.a.c", "model.a.d", "model.e", "model.a.b"
    }
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"d"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_no_modules_of_model_import_each_other() -> None:
    assert _cycles(_model_imports()) == []


def test_the_kernels_import_nothing_else_of_the_runtime() -> None:
    """model/runtime/kernels/ (the compiled and the device kernels of the rollout) is a leaf of
    the runtime: neither the backends nor the forecast driver (model/runtime/rollout/) that
    call it, nor the runtime itself."""
    def within(module: str, package: str) -> bool:
        return module == package or module.startswith(package + ".")

    kernels = "model.runtime.kernels"
    found = {m: imported for m, imported in _model_imports().items() if within(m, kernels)}
    assert len(found) > 5, "the kernels' modules are found"
    offenders = {
        module: sorted(
            m for m in imported
            if within(m, "model.runtime") and not within(m, kernels) and m != "model.runtime"
        )
        for module, imported in found.items()
    }
    assert {m: out for m, out in offenders.items() if out} == {}


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_importing_the_app_loads_no_training_module() -> None:
    result = _run(
        "import sys, service.main\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'training'))"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_smct_serve_runs_without_the_training_package() -> None:
    """What the serving image holds is enough for `smct serve` (its --help parses the whole
    command line) and for the app; `smct train` says that its package is missing."""
    result = _run(
        BLOCK_TRAINING
        + "import service.main\n"
        + "from typer.testing import CliRunner\n"
        + "from cli.app import app\n"
        + "r = CliRunner().invoke(app, ['serve', '--help'])\n"
        + "assert r.exit_code == 0, r.output\n"
        + "r = CliRunner().invoke(app, ['train', '--epochs', '1'])\n"
        + "print(type(r.exception).__name__, r.exception)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "ImportError" in result.stdout and "not in the serving image" in result.stdout


def _copied(dockerfile: Path) -> set[str]:
    return set(re.findall(r"^COPY (\w+)/ \./\1/$", dockerfile.read_text(), flags=re.M))


def test_serving_images_hold_no_training_code() -> None:
    for name in ("Dockerfile", "Dockerfile.cuda"):
        assert _copied(ROOT / "docker" / name) == {"model", "service", "cli", "timeseries"}, name
        ignore = (ROOT / "docker" / f"{name}.dockerignore").read_text()
        assert "!training" not in ignore and "!cli" in ignore
    trainer = _copied(ROOT / "docker" / "Dockerfile.trainer")
    assert trainer == {"model", "service", "cli", "timeseries", "training"}
