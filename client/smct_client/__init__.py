"""Python client of the smct forecasting service (docs/api.md of the service)."""

from smct_client._wire import Retry
from smct_client.client import AsyncClient, Client
from smct_client.errors import ApiError, SeqConflict, SmctError, Unavailable
from smct_client.models import (
    Event,
    Forecast,
    ForecastAnswer,
    Missed,
    ModelInfo,
    ObservationResult,
    ObservationsAnswer,
    ScoredForecast,
    SeriesAdaptation,
    SeriesInfo,
)

__all__ = [
    "ApiError",
    "AsyncClient",
    "Client",
    "Event",
    "Forecast",
    "ForecastAnswer",
    "Missed",
    "ModelInfo",
    "ObservationResult",
    "ObservationsAnswer",
    "Retry",
    "ScoredForecast",
    "SeqConflict",
    "SeriesAdaptation",
    "SeriesInfo",
    "SmctError",
    "Unavailable",
]
