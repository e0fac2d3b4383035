"""The answers about the service itself: the model it serves, its health, and the body of
every error."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ModelInfo(BaseModel):
    model_version: str
    stateful: bool = Field(
        description="true for the SMC Transformer (the /v1/series endpoints work); false for "
        "a baseline, which answers only the stateless forecasts"
    )
    point_forecast: bool = Field(
        False, description="true for a point forecaster (the lstm and transformer baselines): "
        "one path per series, so every interval has zero width (lo = hi) and no uncertainty "
        "is claimed; false for a model whose intervals come from its predictive law",
    )
    backend: str
    device: str
    n_features: int
    target_dim: int
    covariates: int = Field(description="covariates among the features: the forecasts need "
                            "their future values (`covariates` of the requests)")
    min_history: int
    manifest: dict[str, Any]


class ModelsResponse(BaseModel):
    models: list[ModelInfo]


class Health(BaseModel):
    status: str = Field(examples=["ok"])
    checks: dict[str, str] = Field(default_factory=dict)


class FieldError(BaseModel):
    field: str
    message: str


class ErrorBody(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "error": "seq_conflict",
                    "message": "seq 7 leaves a gap; the next seq is 5",
                    "next_seq": 5,
                }
            ]
        }
    )

    error: str
    message: str
    fields: list[FieldError] | None = None
    next_seq: int | None = None
