"""Layers point down: timeseries/ (data types) and model/ import nothing above them, and the
service starts without the training code (the serving images copy no training/)."""

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
