"""The dashboard (/ui) and the series list it reads: static files with no outside address,
the list's paging on both stores, and the pages in a real headless Chromium against a running
service: the fan chart draws, a new observation appears without a reload, the key form works.

Set SMCT_UI_SCREENSHOTS to a folder to keep a screenshot of each page (docs/figures/ui)."""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from service.main import UI_DIR
from tests.service.conftest import ThreadServer
from tests.service.test_api import history, put

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def test_the_list_pages_through_the_series(client: TestClient, runtime: Any) -> None:
    for name in ("b-2", "a-1", "b-1", "c-1", "b-3"):
        put(client, runtime, name)
    r = client.get("/v1/series", params={"limit": 2})
    assert r.status_code == 200 and r.json() == {"series": ["a-1", "b-1"], "next": "b-1"}
    r = client.get("/v1/series", params={"limit": 2, "after": "b-1"})
    assert r.json() == {"series": ["b-2", "b-3"], "next": "b-3"}
    assert client.get("/v1/series", params={"limit": 2, "after": "b-3"}).json() == {
        "series": ["c-1"], "next": None,
    }
    assert client.get("/v1/series", params={"prefix": "b-"}).json()["series"] == [
        "b-1", "b-2", "b-3",
    ]
    client.delete("/v1/series/b-2")
    assert "b-2" not in client.get("/v1/series").json()["series"]
    bad = client.get("/v1/series", params={"prefix": "a*"})
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_input"


def test_the_dashboard_is_served_and_self_contained(client: TestClient) -> None:
    """/ui/ is the page, its script and the vendored chart library load from the service, and
    nothing in it names an outside address (it must work on a closed network)."""
    page = client.get("/ui/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    for src in re.findall(r'(?:src|href)="([^"]+)"', page.text):
        assert not src.startswith(("http:", "https:", "//")), src
        assert client.get("/ui/" + src).status_code == 200, src
    for path in UI_DIR.rglob("*.js"):
        assert not re.search(r"""["'](https?:)?//[a-z]""", path.read_text()), path


# ------------------------------------------------------------------ in a real browser


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        if os.environ.get("CI"):
            pytest.fail("chromium is missing (CI is set): scripts/install_system_deps.sh")
        pytest.skip("chromium and chromedriver are not installed")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1200,900"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


def wait_for(check: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = check()
            if got:
                return got
        except Exception:  # noqa: BLE001 (the page is still loading)
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError("the page did not get there in time")
        time.sleep(0.1)


def shot(driver: Any, name: str) -> None:
    folder = os.environ.get("SMCT_UI_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(folder) / f"{name}.png"))


DREW = """
const c = document.querySelector('#fan canvas');
if (!c) return 0;
const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
let n = 0;
for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++;
return n;
"""


def test_the_pages_in_a_browser(browser: Any, runtime: Any) -> None:
    from service.main import create_app
    from service.settings import Settings

    app = create_app(Settings(batch_max_wait_ms=1.0, default_samples=200), runtime=runtime)
    with ThreadServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        values = history(runtime)
        assert http.put("/v1/series/shop-1", json={"values": values}).status_code == 201
        seq = http.get("/v1/series/shop-1").json()["seq"]
        for k in range(12):
            body = {"observations": [{"seq": seq + k, "value": values[-1] + 0.3 * (k % 4)}]}
            assert http.post("/v1/series/shop-1/observations", json=body).status_code == 200
        http.put("/v1/series/shop-2", json={"values": values})

        browser.get(server.url + "/ui/#/")
        links = wait_for(lambda: browser.find_elements("css selector", "#view a"))
        assert [a.text for a in links] == ["shop-1", "shop-2"]
        shot(browser, "series-list")

        links[0].click()
        wait_for(lambda: browser.find_element("id", "obs-count").text == "12")
        assert wait_for(lambda: browser.execute_script(DREW)) > 1000  # the chart drew
        assert browser.find_element("id", "picp").text.count("%") == 2
        # coverage by horizon: steps 1, 2, 3 and 6 scored by the 12 values after the PUT
        steps = browser.find_element("id", "picp-steps").text
        assert re.findall(r"^(\d+) ", steps, re.M) == ["1", "2", "3", "6"], steps
        shot(browser, "series")
        # a new observation appears without a reload
        body = {"observations": [{"seq": seq + 12, "value": values[-1]}]}
        assert http.post("/v1/series/shop-1/observations", json=body).status_code == 200
        wait_for(lambda: browser.find_element("id", "obs-count").text == "13")
        assert browser.execute_script("return performance.navigation.type") == 0  # no reload

        browser.get(server.url + "/ui/#/models")
        wait_for(lambda: runtime.model_version in browser.find_element("id", "view").text)
        shot(browser, "model")
        browser.get(server.url + "/ui/#/calibration")
        total = wait_for(lambda: browser.find_element("id", "total").text)
        assert int(total) == 13
        rows = browser.find_element("id", "by-step").text.splitlines()[1:]
        assert [r.split()[0] for r in rows] == ["1", "2", "3", "6", "12"], rows
        shot(browser, "calibration")


def test_the_key_form(browser: Any, runtime: Any) -> None:
    """With API keys set, the page asks for one, and lists the series once given."""
    from service.main import create_app
    from service.settings import Settings

    app = create_app(Settings(api_keys="secret-1", default_samples=200), runtime=runtime)
    with ThreadServer(app) as server:
        httpx.put(server.url + "/v1/series/k1", json={"values": history(runtime)},
                  headers={"authorization": "Bearer secret-1"}, timeout=30)
        browser.get(server.url + "/ui/#/")
        key = wait_for(lambda: browser.find_element("id", "key"))
        wait_for(lambda: key.is_displayed())
        key.send_keys("secret-1")
        browser.find_element("css selector", "#key-form button").click()
        links = wait_for(lambda: browser.find_elements("css selector", "#view a"))
        assert [a.text for a in links] == ["k1"]
        browser.execute_script("sessionStorage.clear()")
