"""Benchmark tables: one CSV and one Markdown file per data set, a summary over all of them, and
the paper's published numbers beside ours (training.paper_results).

Point forecasters (deterministic LSTM and Transformer) have intervals of zero width: the CSV
keeps the raw numbers (PICP near 0, MPIW 0), the Markdown writes N.A. as the paper does.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from training import paper_results

KINDS = ("unistep", "multistep")
LEVELS = ("0.8", "0.95")


def flat(record: dict[str, Any]) -> dict[str, Any]:
    """One CSV row of a benchmark record."""
    row: dict[str, Any] = {"model": record["model"], "dataset": record["dataset"]}
    for kind in KINDS:
        m, k = record[kind], "uni" if kind == "unistep" else "multi"
        row[f"{k}_mse"] = m["mse"]
        row[f"{k}_dist_mse"] = m["dist_mse"]
        for lv in LEVELS:
            row[f"{k}_picp_{lv}"] = m["picp"][lv]
            row[f"{k}_mpiw_{lv}"] = m["mpiw"][lv]
        row[f"{k}_crps"] = m["crps"]
    row["train_seconds"] = record["train_seconds"]
    row["infer_ms_per_window"] = record["infer_ms_per_window"]
    row["epochs"] = record["epochs"]
    row["point_forecast"] = record["point_forecast"]
    return row


def _f(v: float | None, digits: int = 3) -> str:
    return "N.A." if v is None else f"{v:.{digits}f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def metrics_table(records: list[dict[str, Any]], kind: str, synthetic: bool) -> str:
    """Markdown table of one kind (unistep or multistep) over the models of a data set."""
    header = ["model", "mse"]
    if synthetic and kind == "unistep":
        header.append("dist-mse")
    header += ["PICP 0.8", "MPIW 0.8", "PICP 0.95", "MPIW 0.95", "CRPS", "train s",
               "infer ms/window"]
    rows = []
    for r in records:
        m, point = r[kind], r["point_forecast"]
        row = [r["model"], _f(m["mse"])]
        if synthetic and kind == "unistep":
            row.append("N.A." if point else _f(m["dist_mse"]))
        for lv in LEVELS:
            row += ["N.A." if point else _f(m["picp"][lv]), "N.A." if point else _f(m["mpiw"][lv])]
        row += [_f(m["crps"]), f"{r['train_seconds']:.1f}", f"{r['infer_ms_per_window']:.1f}"]
        rows.append(row)
    return _table(header, rows)


def paper_table(dataset: str, records: list[dict[str, Any]],
                truth_dist_mse: float | None = None) -> str | None:
    """Our numbers beside the paper's (Table 1 for synthetic, Tables 4 and 2 for real sets)."""
    ours = {r["model"]: r for r in records}
    if dataset in paper_results.SYNTHETIC:
        paper = paper_results.SYNTHETIC[dataset]
        header = ["model", "mse (ours)", "mse (paper)", "dist-mse (ours)", "dist-mse (paper)"]
        rows = []
        for name, (p_mse, p_dist) in paper.items():
            r = ours.get(name)
            if name == "truth":
                ours_truth = "" if truth_dist_mse is None else _f(truth_dist_mse)
                rows.append(["true model", "", _f(p_mse, 2), ours_truth, _f(p_dist, 2)])
                continue
            mse = _f(r["unistep"]["mse"]) if r else "-"
            dist = ("N.A." if r["point_forecast"] else _f(r["unistep"]["dist_mse"])) if r else "-"
            rows.append([name, mse, _f(p_mse, 2), dist, _f(p_dist)])
        return _table(header, rows)
    if dataset not in paper_results.MULTISTEP:
        return None
    parts = []
    for kind, published in (("unistep", paper_results.UNISTEP[dataset]),
                            ("multistep", paper_results.MULTISTEP[dataset])):
        header = ["model", "mse (ours)", "mse (paper)", "PICP 0.95 (ours)", "PICP 0.95 (paper)",
                  "MPIW 0.95 (ours)", "MPIW 0.95 (paper)"]
        rows = []
        for name, (p_mse, p_picp, p_mpiw) in published.items():
            r = ours.get(name)
            if r is None:
                rows.append([name, "-", _f(p_mse), "-", _f(p_picp, 2), "-", _f(p_mpiw, 2)])
                continue
            m, point = r[kind], r["point_forecast"]
            rows.append([name, _f(m["mse"]), _f(p_mse),
                         "N.A." if point else _f(m["picp"]["0.95"], 2), _f(p_picp, 2),
                         "N.A." if point else _f(m["mpiw"]["0.95"], 2), _f(p_mpiw, 2)])
        table = "paper Table 4" if kind == "unistep" else "paper Table 2"
        parts.append(f"{kind} ({table}):\n\n" + _table(header, rows))
    return "\n\n".join(parts)


def _unistep_heading(setting: dict[str, Any]) -> str:
    """Which steps the unistep table scores (``unistep_from`` > 1: the scaling leaks before)."""
    first = setting.get("unistep_from", 1)
    if first <= 1:
        return "Unistep (X_t given X_{1:t-1}, every step of every test window):"
    return (
        f"Unistep (X_t given X_{{1:t-1}}, steps {first + 1}-{setting['window']} of every test "
        "window: the scaling of the earlier ones uses later values of the window):"
    )


def dataset_markdown(dataset: str, records: list[dict[str, Any]], setting: dict[str, Any]) -> str:
    synthetic = dataset.startswith("synthetic")
    plan = setting["plan"]
    lines = [
        f"## {dataset}",
        "",
        f"Training windows {setting['train_windows']}, epochs {plan['epochs']}, batch "
        f"{plan['batch_size']}, test windows {setting['test_windows']} (window {setting['window']},"
        f" multistep history {setting['history']}), {plan['samples']} samples per forecast, "
        f"d_model {setting['d_model']}, particles {setting['particles']}, seed {setting['seed']}"
        + "".join(f", {k} {v}" for k, v in setting.get("data_options", {}).items()) + ".",
        "",
        _unistep_heading(setting),
        "",
        metrics_table(records, "unistep", synthetic),
        "",
        f"Multistep (X_{{tau_H+h}} given X_{{1:tau_H}}, tau_H = {setting['history']}):",
        "",
        metrics_table(records, "multistep", synthetic),
    ]
    paper = paper_table(dataset, records, setting.get("dist_mse_truth"))
    if paper:
        lines += ["", "Beside the paper:", "", paper]
    return "\n".join(lines) + "\n"


def write_dataset(out: Path, dataset: str, records: list[dict[str, Any]],
                  setting: dict[str, Any]) -> None:
    """out/results.csv and out/results.md for one data set."""
    rows = [flat(r) for r in records]
    with (out / "results.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (out / "results.md").write_text(dataset_markdown(dataset, records, setting))


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    """All data sets in one Markdown file, with the command that produced it."""
    lines = ["# Benchmark results", ""]
    if summary.get("command"):
        lines += ["```", summary["command"], "```", ""]
    for ds in summary["datasets"]:
        lines.append(dataset_markdown(ds["dataset"], ds["records"], ds["setting"]))
    path.write_text("\n".join(lines))
