"""The web UI in a real browser: headless Chromium (Debian's `chromium`, driven by Playwright) against
`sglang-tuner serve --dev` on a loopback port, running the casebook's coding-assistant playbook on the simulator.

Each test writes a screenshot of the page it checked into its temporary folder, and fails on any console error.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.api.service_process import Service, free_port

pytestmark = pytest.mark.slow

playwright_api = pytest.importorskip("playwright.sync_api")
CHROMIUM = os.environ.get("SGLANG_TUNER_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    if os.environ.get("CI"):
        raise RuntimeError("the browser tests need Chromium: `apt-get install chromium` (.ci/run installs it)")
    pytest.skip("no Chromium on this machine: `apt-get install chromium`", allow_module_level=True)

TERMINAL = {"succeeded", "slo_not_met", "failed", "cancelled"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    running = Service(tmp_path_factory.mktemp("ui") / "tuner.db", free_port(), "--dev")
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def api(service: Service) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, timeout=70) as client:
        yield client


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright_api.sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()


class Page:
    """A browser tab that records console errors and uncaught exceptions."""

    def __init__(self, browser: object, allowed: tuple[str, ...] = ()) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
        self.errors: list[str] = []
        self.allowed = allowed
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(f"uncaught: {error}"))

    def _console(self, message: object) -> None:
        if message.type == "error" and not any(a in message.text for a in self.allowed):  # type: ignore[attr-defined]
            self.errors.append(message.text)  # type: ignore[attr-defined]

    def shot(self, path: Path) -> None:
        self.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 10_000

    def close(self) -> None:
        self.page.close()
        assert self.errors == []


def _finished(api: httpx.Client, job_id: str) -> dict:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        job = api.get(f"/v1/jobs/{job_id}", params={"wait": 30}).json()
        if job["state"] in TERMINAL:
            return job
    raise AssertionError(f"job {job_id} did not finish")


@pytest.fixture(scope="module")
def finished_job(api: httpx.Client) -> dict:
    created = api.post("/v1/jobs", json={"playbook": "coding-assistant"})
    assert created.status_code == 202
    return _finished(api, created.json()["id"])


def test_the_jobs_list_shows_a_finished_casebook_job(browser: object, finished_job: dict, service: Service,
                                                   tmp_path: Path) -> None:
    assert finished_job["state"] == "succeeded"
    tab = Page(browser)
    tab.page.goto(f"{service.url}/ui")
    row = tab.page.locator(f"tr[data-job='{finished_job['id']}']")
    playwright_api.expect(row.locator(".slo")).to_have_text("met", timeout=15_000)
    assert row.locator("td").nth(1).inner_text() == "coding-assistant"
    assert row.locator(".badge").first.inner_text() == "succeeded"
    assert "rounds decided" in row.locator(".progress").inner_text()
    options = tab.page.locator("#playbook option").all_inner_texts()
    assert {"coding-assistant", "document-qa-rag", "nightly-batch", "structured-output"} <= set(options)
    tab.shot(tmp_path / "jobs.png")
    tab.close()


def test_the_job_page_draws_the_rounds_the_frontier_and_the_final_configuration(
        browser: object, finished_job: dict, service: Service, api: httpx.Client, tmp_path: Path) -> None:
    frontier = api.get(f"/v1/jobs/{finished_job['id']}/frontier").json()
    report = api.get(f"/v1/jobs/{finished_job['id']}/report").json()
    measured = [r["index"] for r in report["rounds"] if r["result"] and r["result"]["status"] == "ok"]
    assert [d["round"] for d in frontier["deployments"]] == measured and len(measured) >= 5
    chosen = [d for d in frontier["deployments"] if d["chosen"]]
    assert len(chosen) == 1 and chosen[0]["round"] == report["path"][-1] == frontier["chosen"] and chosen[0]["pareto"]

    tab = Page(browser)
    tab.page.goto(f"{service.url}/ui/jobs/{finished_job['id']}")
    page = tab.page
    page.locator("[data-chart=frontier-ttft] svg").first.wait_for(timeout=15_000)
    for chart in ("frontier-ttft", "frontier-itl"):
        dots = page.locator(f"[data-chart={chart}] g[aria-description=deployments] > *")
        assert dots.count() == len(measured), chart
        assert page.locator(f"[data-chart={chart}] g[aria-description=chosen] > *").count() == 1
        assert page.locator(f"[data-chart={chart}] g[aria-description=slo-region] > *").count() == 1
    assert "simulated (aiconfigurator)" in page.locator("[data-chart=frontier-ttft] .source").inner_text()
    # Each headline figure per round, with its repeats as points and the SLO target drawn where one bounds it.
    ttft = page.locator("[data-chart=round-p95_ttft_ms]")
    assert ttft.locator("g[aria-description=rounds] > *").count() == len(measured)
    assert ttft.locator("g[aria-description=repeats] > *").count() == sum(
        r["repeats"] for r in report["rounds"] if r["index"] in measured)
    assert "SLO 1,000" in ttft.inner_text()
    rows = page.locator("#rounds tbody tr")
    assert rows.count() == len(report["rounds"])
    tp = rows.nth(1)
    assert "--chunked-prefill-size" in tp.inner_text() and "95% CI" in tp.inner_text()
    assert tp.locator(".badge").inner_text() == report["rounds"][1]["verdict"].replace("_", " ")
    assert page.locator("#slo").inner_text().startswith("Final deployment\nmeets its SLO")
    launch = page.locator("#launch").inner_text()
    assert "python -m sglang.launch_server --model-path Qwen/Qwen3.6-27B" in launch
    assert page.locator("#copy").is_visible()
    tab.shot(tmp_path / "job.png")
    tab.close()


def test_a_running_jobs_page_gains_rows_as_rounds_finish(browser: object, service: Service, api: httpx.Client,
                                                        tmp_path: Path) -> None:
    created = api.post("/v1/jobs", json={"playbook": "coding-assistant", "seed": 3}).json()
    tab = Page(browser)
    page = tab.page
    page.goto(f"{service.url}/ui/jobs/{created['id']}")
    page.locator("#live").wait_for(timeout=15_000)
    decided = page.locator("#rounds tbody tr td:nth-child(4) .badge")
    decided.first.wait_for(timeout=60_000)
    seen = decided.count()
    page.screenshot(path=str(tmp_path / "running.png"), full_page=True)
    assert api.get(f"/v1/jobs/{created['id']}").json()["state"] == "running"
    deadline = time.monotonic() + 90
    while decided.count() <= seen and time.monotonic() < deadline:
        page.wait_for_timeout(200)
    assert decided.count() > seen, "no new decided round appeared without a reload"
    # The stream's job_finished brings the final configuration in, still without a reload.
    done = _finished(api, created["id"])
    playwright_api.expect(page.locator("h1 .badge")).to_have_text(done["state"].replace("_", " "), timeout=15_000)
    page.locator("#launch").wait_for(timeout=15_000)
    assert page.locator("#live").count() == 0
    tab.shot(tmp_path / "finished.png")
    tab.close()


def test_a_bad_scenario_file_shows_the_apis_error_and_a_job_started_from_the_form_can_be_cancelled(
        browser: object, service: Service, api: httpx.Client, tmp_path: Path) -> None:
    scenario = Path(__file__).resolve().parents[2] / "playbooks" / "scenarios" / "coding-assistant-round0.toml"
    bad = scenario.read_text().replace("tp-size", "tp_sise", 1).encode()
    # The API's 422 is the answer under test: the browser logs that response, nothing else may be logged.
    tab = Page(browser, allowed=("status of 422",))
    page = tab.page
    page.goto(f"{service.url}/ui")
    page.locator("#playbook option[value=coding-assistant]").wait_for(state="attached")
    page.set_input_files("#scenario-file", files=[{"name": "bad.toml", "mimeType": "application/toml", "buffer": bad}])
    page.click("#start")
    problem = page.locator("#start-error .problem")
    problem.wait_for(timeout=15_000)
    text = problem.inner_text()
    assert "bad.toml: line" in text and "unknown key `tp_sise`" in text
    assert "field: deployment.groups[0].server.tp_sise" in text and "fix: did you mean `tp-size`?" in text
    tab.shot(tmp_path / "bad-scenario.png")
    # Without the file the playbook's own scenario runs: the form opens the new job's page, whose button cancels it.
    page.set_input_files("#scenario-file", files=[])
    page.click("#start")
    page.wait_for_url(f"{service.url}/ui/jobs/job_*", timeout=15_000)
    page.locator("#rounds tbody tr td:nth-child(4) .badge").first.wait_for(timeout=60_000)  # under way
    page.locator("#cancel").click()
    # The cancel reached the service, and the page shows the ending the service recorded once the stream has ended.
    ended = _finished(api, page.url.rsplit("/", 1)[1])
    assert ended["cancel_requested"] is True and ended["state"] == "cancelled"
    playwright_api.expect(page.locator("h1 .badge")).to_have_text(ended["state"].replace("_", " "), timeout=15_000)
    assert page.locator("#cancel").count() == 0 and page.locator("#live").count() == 0
    tab.shot(tmp_path / "cancelled.png")
    tab.close()
