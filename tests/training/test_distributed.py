"""DDP under torchrun on CPU (gloo): ranks stay identical and the loss goes down."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def test_torchrun_two_ranks_agree_and_learn(tmp_path: Path) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [
            str(torchrun),
            "--nproc_per_node=2",
            "--standalone",
            str(ROOT / "tests/training/ddp_worker.py"),
            str(tmp_path),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=False)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=False)
    assert r0["state"].keys() == r1["state"].keys()
    for name, value in r0["state"].items():  # parameters and the EM covariances
        assert torch.allclose(value, r1["state"][name], rtol=0, atol=1e-6), name
    sig0 = r0["state"]["obs.sigma_obs"]
    assert not torch.allclose(sig0, torch.full_like(sig0, 0.5))  # EM did move it
    for run in (r0, r1):
        loss = [h["loss"] for h in run["history"]]
        nll = [h["val_nll"] for h in run["history"]]
        assert loss[-1] < loss[0] and nll[-1] < nll[0], (loss, nll)
