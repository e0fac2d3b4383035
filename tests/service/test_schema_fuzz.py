"""A bounded schemathesis run over every operation of the OpenAPI document, against the live
ASGI app: generated requests (valid and invalid, by the schema) never get a 5xx, and every
answer is one the document lists, in the schema and content type it gives.

Once on an open API, once behind API keys (SMCT_API_KEYS): there each request goes as
generated (its own Authorization header, if any, never a key: a 401 on /v1) and again with a
key. Half the requests go to a series that exists, or forecast one whose history the model
takes, with a horizon and a sample count within the app's limits (the other fields as
generated), so that generated forecast parameters and observations reach the model;
forecasts that name no sample count get the service's own (SMCT_DEFAULT_SAMPLES unset).
Derandomized, so the same requests on every run; sized to take well under a minute on one
busy core."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation import GenerationMode
from schemathesis.python import asgi

from tests.service.test_api import history

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
KEY = "fuzz-key-1"
EXAMPLES = {"open": 50, "keyed": 20}  # per operation; a keyed example makes two calls
SERIES = "fuzz-1"  # the series that exists
STATELESS = ("/v1/forecast", "/v1/forecast/stream")
LIMITS = {"horizon": 16, "num_samples": 200}  # the app's (small: each request stays quick)


def _schema(runtime: Any, keys: str) -> Any:
    """The schema of a live app with small limits, on which the series SERIES exists."""
    from service.main import create_app
    from service.settings import Settings

    app = create_app(Settings(batch_max_wait_ms=1.0, max_samples=LIMITS["num_samples"],
                              max_horizon=LIMITS["horizon"], api_keys=keys), runtime=runtime)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    asgi_app: Any = app
    with asgi.get_client(asgi_app) as client:  # the app schemathesis calls: its lifespan
        auth = {"Authorization": f"Bearer {keys}"} if keys else {}
        made = client.put(f"/v1/series/{SERIES}", json={"values": history(runtime)},
                          headers=auth)
        assert made.status_code == 201, made.text
    return schema


def _aim(case: Any, values: list[float], stored: bool, stateless: bool) -> None:
    """Aim `case` at what the model can run: the series that exists (a request to a series),
    a history it takes (a stateless forecast), a horizon and sample count within LIMITS."""
    if stored:
        case.path_parameters = {**case.path_parameters, "series_id": SERIES}
    if stateless and isinstance(case.body, dict):
        case.body = {**case.body, "series": [{"id": "a", "values": values}]}
    for part in ("body", "query"):
        fields = getattr(case, part)
        if isinstance(fields, dict):
            setattr(case, part, {k: _within(k, v) for k, v in fields.items()})


def _within(name: str, value: Any) -> Any:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    return min(value, LIMITS[name]) if name in LIMITS and number else value


def _conforms(operation: Any, keyed: bool, values: list[float], answered: list[int]) -> Any:
    """The property of one operation: its generated requests, some aimed (`_aim`), conform;
    behind keys each goes without the key (a 401 on /v1), then with it. The statuses of the
    /v1 requests let in go to `answered`."""
    guarded = keyed and operation.path.startswith("/v1")
    stored = "{series_id}" in operation.path and operation.method != "delete"
    stateless = operation.path in STATELESS
    modes = [GenerationMode.POSITIVE, GenerationMode.NEGATIVE]

    @given(case=st.one_of(*(operation.as_strategy(generation_mode=m) for m in modes)),
           existing=st.booleans())
    @settings(max_examples=EXAMPLES["keyed" if keyed else "open"], derandomize=True,
              database=None, deadline=None, suppress_health_check=list(HealthCheck))
    def conforms(case: Any, existing: bool) -> None:
        if existing:
            _aim(case, values, stored, stateless)
        response = case.call_and_validate(checks=CHECKS)
        if guarded:
            assert response.status_code == 401, (case.headers, response.text)
            # the case's own header wins over one passed to the call: replace it
            case.headers = {**(case.headers or {}), "Authorization": f"Bearer {KEY}"}
            response = case.call_and_validate(checks=CHECKS)
        if operation.path.startswith("/v1"):
            answered.append(response.status_code)

    return conforms


@pytest.mark.parametrize("access", ["open", "keyed"])
def test_every_operation_conforms(access: str, runtime: Any) -> None:
    keyed = access == "keyed"
    api_schema, values = _schema(runtime, KEY if keyed else ""), history(runtime)
    checked: list[str] = []
    answered: list[int] = []  # the statuses of the /v1 requests let in
    for result in api_schema.get_all_operations():
        operation = result.ok()
        if operation.path.endswith("/events"):
            continue  # a stream that does not end: tests/service/test_sse.py
        _conforms(operation, keyed, values, answered)()
        checked.append(f"{operation.method.upper()} {operation.path}")
    assert len(checked) >= 13, checked
    assert 401 not in answered and sum(200 <= s < 300 for s in answered) >= 50, answered
