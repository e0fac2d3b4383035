"""A bounded schemathesis run over every operation of the OpenAPI document: generated requests
(valid and invalid, by the schema) never get a 5xx, and every answer is one the document
lists, in the schema it gives. Derandomized, so the same requests on every run."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis  # noqa: F401 (from_asgi below)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation import GenerationMode

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


@pytest.fixture(scope="module")
def api_schema(runtime: Any) -> Any:
    from service.main import create_app
    from service.settings import Settings

    # small limits keep each generated request quick: the bounds are in the schema
    app = create_app(Settings(batch_max_wait_ms=1.0, default_samples=50, max_samples=200,
                              max_horizon=16), runtime=runtime)
    return schemathesis.openapi.from_asgi("/openapi.json", app)


def test_every_operation_conforms(api_schema: Any) -> None:
    checked = []
    for result in api_schema.get_all_operations():
        operation = result.ok()
        if operation.path.endswith(("/events", "/stream")):
            continue  # streams do not end: tests/service/test_sse.py

        modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]

        @given(case=st.one_of(*(operation.as_strategy(generation_mode=m) for m in modes)))
        @settings(max_examples=40, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        def conforms(case: Any) -> None:
            case.call_and_validate(checks=CHECKS)

        conforms()
        checked.append(f"{operation.method.upper()} {operation.path}")
    assert len(checked) >= 12, checked
