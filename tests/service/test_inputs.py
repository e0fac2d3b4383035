"""Request values as the model's inputs (service/inputs.py), on the real runtime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from service.errors import InvalidInput
from service.inputs import ModelInputs


def test_values_are_checked_against_the_model(runtime: Any) -> None:
    inputs = ModelInputs(runtime)
    f = runtime.n_features
    x = inputs.matrix([1.0, None, [2.0] * f if f > 1 else 2.0], "values")
    assert x.shape == (3, f) and np.isnan(x[1]).all()
    with pytest.raises(InvalidInput, match="features"):
        inputs.matrix([[1.0] * (f + 1)], "values")
    with pytest.raises(InvalidInput, match="no observed value"):
        inputs.history([None] * max(runtime.min_history, 2), "values")
