"""Layers point down: timeseries/ (data types) and model/ import nothing above them, the
packages of model/ import nothing of those above them (MODEL_LAYERS), and the service starts
without the training code (the serving images copy no training/)."""

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


def _model_packages(source: str, package: str) -> set[str]:
    """The packages of model/ that a module of model.`package` imports, wherever the import
    is (in a function, under TYPE_CHECKING); relative imports resolved."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x, from .x import y, from .. import x
                parent = ["model", package][: 2 - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        out.update(n.split(".")[1] for n in names if n.startswith("model.") and n.count("."))
    return out


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
