"""Tests of training/datasets/__init__.py: the data sets by name."""

from __future__ import annotations

import pytest

from training.datasets import DATASETS, load_dataset


def test_datasets_constant() -> None:
    assert DATASETS == ("synthetic-1", "synthetic-2", "covid", "air-quality", "stock",
                        "synthetic-mix", "corpus", "corpus-real")


def test_unknown_name_lists_valid_ones() -> None:
    with pytest.raises(ValueError, match="synthetic-1, synthetic-2, covid, air-quality, stock"):
        load_dataset("weather")
