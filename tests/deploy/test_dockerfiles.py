"""Static checks of the images in docker/: lint, build context, pins, user, health check."""

from __future__ import annotations

import fnmatch
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILES = ("Dockerfile", "Dockerfile.cuda", "Dockerfile.trainer")
SERVICE_IMAGES = ("Dockerfile", "Dockerfile.cuda")


def instructions(name: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of docker/<name>, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", (REPO / "docker" / name).read_text())
    pairs = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            pairs.append((keyword.upper(), rest.strip()))
    return pairs


def build_args(name: str) -> dict[str, str]:
    return dict(
        rest.split("=", 1)
        for keyword, rest in instructions(name)
        if keyword == "ARG" and "=" in rest
    )


def pyproject_pins() -> dict[str, str]:
    """Name -> version of every dependency; each must be pinned with ==."""
    pins = {}
    for dependency in tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "dependencies"
    ]:
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", dependency)
        assert match, f"pyproject.toml dependency {dependency!r} is not pinned with =="
        pins[match.group(1)] = match.group(2)
    return pins


def ignored(path: str, patterns: list[str]) -> bool:
    """Whether a .dockerignore excludes `path` (last matching pattern wins, ! re-includes)."""
    parts = path.rstrip("/").split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        regex = fnmatch.translate(pattern.replace("**/", "*"))
        if any(re.match(regex, candidate) for candidate in candidates):
            excluded = not negate
    return excluded


@pytest.mark.parametrize("name", DOCKERFILES)
def test_hadolint_clean(name: str, hadolint: str, run) -> None:
    run(hadolint, "--no-color", str(REPO / "docker" / name))


@pytest.mark.parametrize("name", DOCKERFILES)
def test_copied_files_exist_and_are_in_the_build_context(name: str) -> None:
    ignore_file = REPO / "docker" / f"{name}.dockerignore"
    patterns = [
        line.strip()
        for line in ignore_file.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    copies = [rest.split() for keyword, rest in instructions(name) if keyword in ("COPY", "ADD")]
    assert copies
    for words in copies:
        if any(word.startswith("--from=") for word in words):
            continue
        sources = [word for word in words if not word.startswith("--")][:-1]
        for source in sources:
            assert (REPO / source).exists(), f"{name} copies {source}, which does not exist"
            assert not ignored(source, patterns), f"{ignore_file.name} excludes {source}"


@pytest.mark.parametrize("name", DOCKERFILES)
def test_multi_stage_pinned_base_non_root(name: str) -> None:
    steps = instructions(name)
    args = build_args(name)
    bases = [rest.split()[0] for keyword, rest in steps if keyword == "FROM"]
    assert len(bases) >= 2, "expected a builder stage and a runtime stage"
    for base in bases:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
        assert re.search(r":\d+\.\d+\.\d+", image), f"base image {image} is not pinned to a version"
    assert any(k == "COPY" and "--from=builder" in rest for k, rest in steps)
    final_stage = steps[max(i for i, (k, _) in enumerate(steps) if k == "FROM") :]
    users = [rest for keyword, rest in final_stage if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "runs as root"


@pytest.mark.parametrize("name", SERVICE_IMAGES)
def test_service_images_check_readiness_and_serve(name: str) -> None:
    steps = dict(instructions(name))
    assert "/health/ready" in steps["HEALTHCHECK"]
    assert "8000" in steps["EXPOSE"]
    assert '"smct"' in steps["ENTRYPOINT"] and '"serve"' in steps["CMD"]
    assert "SMCT_ARTIFACT=/artifacts/default" in steps["ENV"]


@pytest.mark.parametrize("name", DOCKERFILES)
def test_compiled_kernels_are_cached_under_tmp(name: str) -> None:
    """numba caches the rollout's kernels beside the package, read-only in the images (and
    the whole root file system in deploy/): its cache goes to /tmp, which the manifests
    mount writable."""
    steps = instructions(name)
    final_stage = steps[max(i for i, (k, _) in enumerate(steps) if k == "FROM") :]
    final_env = [rest for keyword, rest in final_stage if keyword == "ENV"]
    assert any("NUMBA_CACHE_DIR=/tmp/" in env for env in final_env)


@pytest.mark.parametrize("name", DOCKERFILES)
def test_torch_pin_matches_pyproject(name: str) -> None:
    pins = pyproject_pins()
    assert build_args(name)["TORCH_VERSION"] == pins["torch"] == "2.13.0"


def test_cuda_image_installs_cuda_torch_and_onnxruntime_gpu() -> None:
    args = build_args("Dockerfile.cuda")
    assert re.fullmatch(r"https://download\.pytorch\.org/whl/cu\d+", args["TORCH_INDEX_URL"])
    text = (REPO / "docker" / "Dockerfile.cuda").read_text()
    assert "--replace onnxruntime=onnxruntime-gpu" in text
    assert "SMCT_DEVICE=cuda" in text
    assert build_args("Dockerfile")["TORCH_INDEX_URL"].endswith("/whl/cpu")


def test_trainer_trains_then_exports(run) -> None:
    steps = dict(instructions("Dockerfile.trainer"))
    assert "train-and-export" in steps["ENTRYPOINT"]
    script = REPO / "docker" / "train-and-export.sh"
    run("sh", "-n", str(script))
    text = script.read_text()
    train = text.index('smct train --dataset "${dataset}" --out "${root}/run"')
    export = text.index('smct export --checkpoint "${root}/run" --out "${root}/default"')
    assert train < export
    assert 'dataset="${TRAIN_DATASET:-synthetic-1}"' in text


def test_constraints_pin_only_transitive_dependencies() -> None:
    direct = {re.sub(r"[-_.]+", "-", name).lower() for name in pyproject_pins()}
    lines = [
        line.strip()
        for line in (REPO / "docker" / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for line in lines:
        name, version = line.split("==")
        assert re.fullmatch(r"[\w.]+", version), line
        assert name.lower() not in direct, f"{name} is pinned in pyproject.toml; drop it here"


def test_requirements_script_swaps_onnxruntime_for_gpu_build(run) -> None:
    script = str(REPO / "docker" / "requirements.py")
    pyproject = str(REPO / "pyproject.toml")
    plain = run(sys.executable, script, pyproject).stdout.split()
    assert plain == [f"{name}=={version}" for name, version in pyproject_pins().items()]
    gpu = run(sys.executable, script, pyproject, "--replace", "onnxruntime=onnxruntime-gpu")
    version = pyproject_pins()["onnxruntime"]
    assert f"onnxruntime-gpu=={version}" in gpu.stdout.split()
    assert f"onnxruntime=={version}" not in gpu.stdout.split()
    unknown = subprocess.run(
        [sys.executable, script, pyproject, "--replace", "nope=x"], capture_output=True, text=True
    )
    assert unknown.returncode != 0 and "nope" in unknown.stderr


def test_install_tools_script_parses(run) -> None:
    run("bash", "-n", str(Path(__file__).with_name("install_tools.sh")))


@pytest.mark.parametrize(
    ("env", "scaling"),
    [
        ({}, ["--scaling", "window"]),  # the default artifact serves series at any level
        ({"TRAIN_SCALING": "global"}, ["--scaling", "global"]),
        ({"TRAIN_DATASET": "stock"}, []),  # a data set without a choice of scaling
    ],
)
def test_trainer_script_scales_for_serving(
    tmp_path: Path, env: dict[str, str], scaling: list[str]
) -> None:
    """train-and-export.sh run against a stand-in `smct` that records its arguments."""
    log = tmp_path / "calls"
    stub = tmp_path / "bin" / "smct"
    stub.parent.mkdir()
    stub.write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    stub.chmod(0o755)
    script = REPO / "docker" / "train-and-export.sh"
    environ = {
        "PATH": f"{stub.parent}:/usr/bin:/bin", "ARTIFACT_ROOT": str(tmp_path / "a"),
        "EXPORT_ARGS": "--particles 20", **env,
    }
    subprocess.run(["sh", str(script), "--epochs", "1"], env=environ, check=True,
                   capture_output=True)
    train, export = (line.split() for line in log.read_text().splitlines())
    dataset = env.get("TRAIN_DATASET", "synthetic-1")
    assert train == ["train", "--dataset", dataset, "--out", f"{tmp_path}/a/run",
                     "--no-progress", *scaling, "--epochs", "1"]
    assert export[-2:] == ["--particles", "20"]
