"""docs/architecture.md's path of one online update stays true: every hop it names exists, and
an update through the app calls each of them; its counts are the table's."""

from __future__ import annotations

import importlib
import re
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from tests.service.test_api import put

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
ROW = re.compile(r"^\| (\d+) \| `([\w.]+):([\w.]+)` \|", re.M)
MAX_HOPS, MAX_MODULES = 35, 25


def _hops() -> list[tuple[str, str]]:
    text = DOC.read_text().split("## The path of one online update", 1)[1]
    rows = ROW.findall(text)
    assert [int(n) for n, _, _ in rows] == list(range(1, len(rows) + 1))
    return [(module, name) for _, module, name in rows]


def test_the_hops_exist_and_their_counts_are_the_tables() -> None:
    hops = _hops()
    for module, name in hops:
        owner: Any = importlib.import_module(module)
        for part in name.split("."):
            owner = getattr(owner, part)
        assert callable(owner), f"{module}:{name}"
    modules = {module for module, _ in hops}
    assert len(hops) <= MAX_HOPS and len(modules) <= MAX_MODULES
    assert f"{len(hops)} hops across {len(modules)} modules" in DOC.read_text()


def test_an_update_calls_every_hop(make_client: Any) -> None:
    """Every hop named is called by one POST of a value to a stored series of the default model
    (after one before it, so that nothing is done for the first time), on the embedded store."""
    from model.runtime.runtime import Runtime

    runtime = Runtime.load(REPO / "artifacts" / "default", device="cpu")
    called: set[tuple[str, str]] = set()
    root, tracing = str(REPO) + "/", threading.Event()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        name = frame.f_code.co_filename
        if event == "call" and tracing.is_set() and name.startswith(root):
            module = name[len(root) : -len(".py")].replace("/", ".")
            called.add((module, frame.f_code.co_qualname))

    threading.setprofile(profile)  # the app's threads (the model's, the event loop's) start
    sys.setprofile(profile)  # profiled
    try:
        client = make_client(runtime_override=runtime)
        t = put(client, runtime)["seq"]
        body = {"observations": [{"seq": t, "value": 0.25}]}
        assert client.post("/v1/series/s1/observations", json=body).status_code == 200
        tracing.set()
        body = {"observations": [{"seq": t + 1, "value": 0.5}]}
        assert client.post("/v1/series/s1/observations", json=body).status_code == 200
        tracing.clear()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    assert [hop for hop in _hops() if hop not in called] == []
