"""The `smct` command line: train, evaluate, export, forecast, serve, benchmark, quality,
backtest, competitions, calibrate.

Each command is its own module and imports what it needs when it runs, so `smct serve` loads
the service and the model, never the training code.
"""

from __future__ import annotations

import typer

from cli.backtest import backtest
from cli.benchmark import benchmark
from cli.calibrate import calibrate
from cli.competitions import competitions
from cli.evaluate import evaluate
from cli.export import export
from cli.forecast import forecast
from cli.quality import quality
from cli.serve import serve
from cli.train import train

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.splitlines()[0])
app.command()(train)
app.command()(evaluate)
app.command()(export)
app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(forecast)
app.command()(serve)
app.command()(benchmark)
app.command()(quality)
app.command()(backtest)
app.command()(competitions)
app.command()(calibrate)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
