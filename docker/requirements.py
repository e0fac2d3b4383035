"""Print the pinned runtime requirements of pyproject.toml, one per line.

The images install dependencies from this list before copying the source tree, so that the
heavy layer (torch, onnxruntime) is cached across code changes. The CUDA image swaps a package
for its GPU build while keeping the pinned version:

    python docker/requirements.py pyproject.toml --replace onnxruntime=onnxruntime-gpu
"""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(.*)$")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(pyproject: Path, replace: dict[str, str]) -> list[str]:
    """Return `[project].dependencies`, with package names swapped per `replace`."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    wanted = {_canonical(old): new for old, new in replace.items()}
    lines = []
    for dependency in dependencies:
        match = _NAME.match(dependency)
        if match is None:
            raise ValueError(f"cannot parse dependency {dependency!r} in {pyproject}")
        name, rest = match.groups()
        lines.append(wanted.pop(_canonical(name), name) + rest)
    if wanted:
        raise ValueError(f"--replace names no dependency of {pyproject}: {sorted(wanted)}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pyproject", type=Path)
    parser.add_argument(
        "--replace",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="install NEW at OLD's pinned version (repeatable)",
    )
    args = parser.parse_args()
    replace = dict(item.split("=", 1) for item in args.replace)
    print("\n".join(requirements(args.pyproject, replace)))


if __name__ == "__main__":
    main()
