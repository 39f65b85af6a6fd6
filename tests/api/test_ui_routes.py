"""The web UI's routes and the scenario-file decoder it uses: pages with no data, scripts from the package only."""

from __future__ import annotations

import re
from pathlib import Path

from litestar.testing import TestClient

from service.api.routes.ui import STATIC
from tests.api.fakes import auth

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "playbooks" / "scenarios" / "coding-assistant-round0.toml"


def test_the_pages_load_only_scripts_and_styles_the_service_serves(client: TestClient) -> None:
    for path in ("/ui", "/ui/jobs/job_123"):
        page = client.get(path)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "default-src 'self'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert sources and all(s.startswith(("/", "data:", "#")) for s in sources), sources
        for source in (s for s in sources if s.startswith("/ui/static/")):
            assert client.get(source).status_code == 200, source
    assert client.get("/ui/static/vendor/plot.umd.min.js").headers["content-type"].startswith("text/javascript")


def test_the_scripts_fetch_nothing_from_another_host() -> None:
    for script in STATIC.glob("*.js"):
        text = script.read_text()
        assert not re.search(r"https?://", text), script.name
    licences = (STATIC / "vendor" / "README.md").read_text()
    assert "0.6.17" in licences and "7.9.2" in licences and "ISC" in licences


def test_the_pages_carry_no_data_but_the_api_behind_them_needs_a_key(client: TestClient) -> None:
    assert client.get("/ui").status_code == 200
    assert client.get("/v1/jobs").status_code == 401
    assert client.get("/v1/jobs/job_123/frontier").status_code == 401


def test_a_scenario_file_decodes_to_the_object_post_jobs_takes(client: TestClient, tokens: dict[str, str]) -> None:
    answer = client.post("/v1/scenarios/decode", json={"toml": SCENARIO.read_text()}, headers=auth(tokens["read"]))
    assert answer.status_code == 200
    scenario = answer.json()["scenario"]
    assert scenario["name"] == "coding-assistant-round0" and scenario["deployment"]["groups"][0]["server"]["tp-size"] == 8


def test_a_bad_scenario_file_names_the_line_the_key_and_the_fix(client: TestClient, tokens: dict[str, str]) -> None:
    text = SCENARIO.read_text().replace("tp-size", "tp_sise", 1)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "tp_sise" in row)
    answer = client.post("/v1/scenarios/decode", json={"toml": text}, headers=auth(tokens["read"]))
    assert answer.status_code == 422
    problem = answer.json()
    assert problem["field"] == "deployment.groups[0].server.tp_sise" and problem["hint"] == "did you mean `tp-size`?"
    assert problem["detail"].startswith(f"line {line}: unknown key `tp_sise`")
    broken = client.post("/v1/scenarios/decode", json={"toml": "name = "}, headers=auth(tokens["read"]))
    assert broken.status_code == 422 and broken.json()["field"] == "toml" and "not valid TOML" in broken.json()["detail"]


def test_the_frontier_of_an_unknown_job_is_a_404_naming_it(client: TestClient, tokens: dict[str, str]) -> None:
    answer = client.get("/v1/jobs/job_nope/frontier", headers=auth(tokens["read"]))
    assert answer.status_code == 404 and "job_nope" in answer.json()["detail"]
