"""Catalogue, health, readiness, metrics and the OpenAPI document."""

from __future__ import annotations

from litestar.testing import TestClient

from tests.api.fakes import auth


def test_catalogue_lists_loaded_components_with_their_plugin(client: TestClient, tokens: dict[str, str]) -> None:
    playbooks = client.get("/v1/playbooks", headers=auth(tokens["read"])).json()
    assert [(p["name"], p["plugin"]) for p in playbooks] == [("coding-assistant", "fake")]
    assert playbooks[0]["details"]["techniques"] == ["chunked_prefill", "fp8"]
    runners = client.get("/v1/runners", headers=auth(tokens["read"])).json()
    assert {r["name"]: r["details"]["capabilities"]["needs_gpu"] for r in runners} == {
        "gpu-host": True, "simulator": False}
    assert client.get("/v1/techniques", headers=auth(tokens["read"])).json() == []
    assert client.get("/v1/policies").status_code == 401


def test_health_and_readiness(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "checks": {}}
    ready = client.get("/readyz").json()
    assert ready == {"status": "ok", "checks": {"database": True, "schema": True, "workers": True}}


def test_every_operation_has_an_id_and_documents_problems(client: TestClient) -> None:
    document = client.get("/schema/openapi.json").json()
    operations = [(path, method, op) for path, item in document["paths"].items()
                  for method, op in item.items() if method in {"get", "post", "delete"}]
    assert len(operations) >= 15
    assert all(op.get("operationId") for _, _, op in operations)
    ids = [op["operationId"] for _, _, op in operations]
    assert len(ids) == len(set(ids))
    create = document["paths"]["/v1/jobs"]["post"]
    assert "application/problem+json" in create["responses"]["401"]["content"]
    assert document["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert client.get("/schema/swagger").status_code == 200


def test_unknown_route_is_problem_json(client: TestClient) -> None:
    response = client.get("/v1/nothing-here")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
