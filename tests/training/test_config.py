"""The training configuration is one tree (model, data, filter, optimisation) whose leaves are
the `smct train` options: built from flat leaves, written and read back, and the checkpoints of
the former flat record still read."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

from cli.train import train as train_command
from model.network.config import ModelConfig
from training.config import SECTIONS, TrainConfig


def test_leaves_route_to_their_sections_and_round_trip() -> None:
    cfg = TrainConfig.of(d_model=8, particles=5, lr=1e-2, dataset="covid", seed=3, lags=True)
    assert cfg.model.d_model == 8 and cfg.model.lags is True
    assert cfg.filter.particles == 5 and cfg.optim.lr == 1e-2 and cfg.data.dataset == "covid"
    assert cfg.seed == 3
    assert TrainConfig.from_dict(cfg.to_dict()) == cfg
    assert TrainConfig.of(**cfg.flat()) == cfg


def test_leaf_names_are_unique_across_the_sections() -> None:
    names = [f for kind in SECTIONS.values() for f in kind.__dataclass_fields__]
    names += [f for f in TrainConfig.__dataclass_fields__ if f not in SECTIONS]
    assert len(names) == len(set(names))


def test_an_unknown_leaf_is_refused() -> None:
    with pytest.raises(TypeError, match="d_modle"):
        TrainConfig.of(d_modle=8)


def test_the_former_flat_record_is_read() -> None:
    flat = {"dataset": "synthetic-1", "data_options": {"scaling": "window"}, "particles": 7,
            "epochs": 3, "d_model": 16, "window": None, "lags": True, "schedule": "noam",
            "history": 12, "kept_epoch": 2}  # the last two: export's additions, not settings
    cfg = TrainConfig.from_dict(flat)
    assert cfg.data.options == {"scaling": "window"} and cfg.filter.particles == 7
    assert cfg.optim.epochs == 3 and cfg.optim.schedule == "noam"
    assert cfg.model.d_model == 16 and cfg.model.lags is True
    assert cfg.model.window == ModelConfig().window  # None: the checkpoint's model keeps its own


def test_the_train_commands_defaults_are_the_trees() -> None:
    defaults = TrainConfig().flat()
    options = inspect.signature(train_command).parameters
    shared = [name for name in options if name in defaults]
    assert len(shared) >= 20  # every setting of the tree the command exposes
    for name in shared:
        given = options[name].default
        if name == "window":  # None: the training windows' length, resolved from the data
            assert given is None
            continue
        assert given == defaults[name], name


def test_a_checkpoint_of_the_flat_record_keeps_its_models_window(tmp_path: Path) -> None:
    """A checkpoint written with the flat record (window None: the training windows') reads
    back with the saved model's configuration, window included."""
    from model.network.smc_transformer import SMCTransformer
    from training.checkpoint import TRAIN_CONFIG, Checkpoint

    model = SMCTransformer(ModelConfig(d_model=8, d_ff=8, window=23))
    Checkpoint(model=model, train_config=TrainConfig(), scaling={"mode": "global"}).save(tmp_path)
    flat = {"dataset": "synthetic-1", "data_options": {}, "particles": 5, "d_model": 8,
            "window": None, "epochs": 1}
    (tmp_path / TRAIN_CONFIG).write_text(json.dumps(flat))
    loaded = Checkpoint.load(tmp_path)
    assert loaded.train_config.model == model.cfg and loaded.train_config.model.window == 23
    assert loaded.train_config.filter.particles == 5
