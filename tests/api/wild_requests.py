"""Hypothesis strategies for requests a careless or hostile client sends: every route, any body, any query.

Each request starts from the shape its route reads (so it reaches the handler and the database) and then
breaks it: a field replaced by any JSON value (huge integers, 10,000-character strings, NUL characters,
lone surrogates), bodies nested up to 2,000 levels, bodies in other encodings or in no encoding at all,
other content types, query strings with percent-encoded garbage, path ids of any text.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

SCENARIO_TEXT = (Path(__file__).parents[2] / "playbooks/scenarios/coding-assistant-round0.toml").read_text()
SCENARIO = tomllib.loads(SCENARIO_TEXT)

# Routes as the app lists them (`test_every_route_is_exercised` keeps this in step with the app).
ROUTES: dict[str, tuple[str, ...]] = {
    "/healthz": ("GET",), "/readyz": ("GET",), "/metrics": ("GET",), "/llms.txt": ("GET",), "/v1/tools": ("GET",),
    "/v1/playbooks": ("GET",), "/v1/techniques": ("GET",), "/v1/runners": ("GET",), "/v1/policies": ("GET",),
    "/v1/jobs": ("GET", "POST"), "/v1/jobs/{job_id:str}": ("GET",), "/v1/jobs/{job_id:str}/cancel": ("POST",),
    "/v1/jobs/{job_id:str}/rounds": ("GET",), "/v1/jobs/{job_id:str}/report": ("GET",),
    "/v1/jobs/{job_id:str}/events": ("GET",), "/v1/schedules": ("GET", "POST"),
    "/v1/schedules/{schedule_id:str}": ("GET", "DELETE"), "/v1/schedules/{schedule_id:str}/fires": ("GET",),
    "/v1/calculators/kv-per-token": ("POST",), "/v1/calculators/kv-capacity": ("POST",),
    "/v1/calculators/threshold-batch": ("POST",), "/v1/calculators/required-throughput": ("POST",),
    "/v1/profiles": ("POST",), "/v1/diagnoses": ("POST",), "/schema/openapi.json": ("GET",),
    "/v1/calibrations": ("GET", "POST"), "/v1/calibrations/{calibration_id:str}": ("GET", "DELETE"),
    "/v1/jobs/{job_id:str}/frontier": ("GET",), "/v1/scenarios/decode": ("POST",),
    "/ui": ("GET",), "/ui/jobs/{job_id:str}": ("GET",), "/ui/static/{file_path:path}": ("GET",),
}

# What each JSON route reads, valid: the starting point of every mutation.
VALID_BODIES: dict[str, dict[str, Any]] = {
    "/v1/jobs": {"playbook": "coding-assistant", "scenario": SCENARIO, "resource": "gpu-host-1", "kind": "round",
                 "runner": "simulator"},
    "/v1/schedules": {"name": "nightly", "cron": "0 3 * * *", "timezone": "Europe/Paris", "enabled": True,
                      "misfire_grace_seconds": 300, "catch_up": "run_once", "job": {"playbook": "coding-assistant"}},
    "/v1/calculators/kv-per-token": {"layers": 48, "kv_heads": 8, "head_dim": 128, "kv_dtype": "fp8_e5m2"},
    "/v1/calculators/kv-capacity": {"gpu": "H100-SXM", "gpus": 4, "weights_gb": 27, "headroom_gb": 35,
                                    "kv_bytes_per_token": 98304, "document_tokens": 20000, "hicache_ratio": 2},
    "/v1/calculators/threshold-batch": {"gpu": "H200-SXM", "dtype": "fp8"},
    "/v1/calculators/required-throughput": {"requests": 2_400_000, "input_tokens": 1200, "output_tokens": 150,
                                            "deadline_s": 43_200},
    "/v1/diagnoses": {"bench_output": '{"request_throughput": 3.2, "median_ttft_ms": 900}', "scenario": SCENARIO,
                      "failure_rate": 0.01, "metrics": "sglang:token_usage 0.91\n"},
    "/v1/scenarios/decode": {"toml": SCENARIO_TEXT},
    "/v1/calibrations": {"scenario": SCENARIO, "cost_model": "roofline", "rounds": [
        {"status": "ok", "bench": {"completed": 8, "output_throughput": 900.0, "median_itl_ms": 8.0},
         "provenance": {"source": "measured", "runner": "attach"}}]},
}

QUERY_PARAMETERS = ("state", "playbook", "runner", "schedule_id", "limit", "cursor", "wait", "after", "format",
                    "model", "gpu")


@dataclass
class WildRequest:
    method: str
    path: str
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    files: dict[str, tuple[str, bytes]] | None = None

    def __repr__(self) -> str:  # hypothesis prints the falsifying example; keep it readable
        body = self.body if self.body is None or len(self.body) < 400 else self.body[:400] + b"..."
        files = {name: content[:200] for name, (_, content) in (self.files or {}).items()}
        return (f"WildRequest({self.method} {self.path}?{self.query[:200]} headers={self.headers} body={body!r}"
                f" files={files})")


_text = st.one_of(st.text(max_size=40), st.sampled_from(["", "\x00", "a\x00b", "\ud800", "é" * 300, "x" * 10_000,
                                                         "../../etc/passwd", "Europe/", "%00", "0" * 400]))
_numbers = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
                     st.sampled_from([0, -1, 2**31, 2**63, 2**64, 1e308, -1e308, 5e-324, 0.5]))
_scalars = st.one_of(st.none(), st.booleans(), _numbers, _text)
json_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_text, inner, max_size=4)), max_leaves=12)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a JSON value, the value's own included."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _paths(child, (*prefix, index))
    return found


def _replaced(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = dict(value) if isinstance(value, dict) else list(value)
    copy[path[0]] = _replaced(copy[path[0]], path[1:], new)
    return copy


def _encode(value: Any) -> bytes:
    # ensure_ascii escapes lone surrogates as \\udXXX, which is valid JSON text
    return json.dumps(value, allow_nan=False).encode()


@st.composite
def mutated_body(draw: st.DrawFn, route: str) -> bytes:
    """A valid body with up to three fields replaced, dropped or added."""
    body: Any = VALID_BODIES[route]
    for _ in range(draw(st.integers(0, 3))):
        target = draw(st.sampled_from(_paths(body)))
        action = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if action == "drop" and target:
            holder: Any = body
            for key in target[:-1]:
                holder = holder[key]
            if isinstance(holder, dict):
                body = _replaced(body, target[:-1], {k: v for k, v in holder.items() if k != target[-1]})
            continue
        if action == "add":
            body = _replaced(body, (), {**body, draw(_text): draw(json_values)}) if isinstance(body, dict) else body
            continue
        body = _replaced(body, target, draw(json_values))
    return _encode(body)


@st.composite
def raw_body(draw: st.DrawFn) -> bytes:
    """A body that is no valid JSON document of the route: deep, mis-encoded, truncated or plain garbage."""
    depth = draw(st.integers(1, 2000))
    kind = draw(st.sampled_from(["deep-list", "deep-object", "utf16", "latin1", "bytes", "bom", "truncated", "nul"]))
    text = draw(st.text(max_size=30))
    if kind == "deep-list":
        return b"[" * depth + b"]" * depth
    if kind == "deep-object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    if kind == "utf16":
        return json.dumps({"playbook": text or "é"}, ensure_ascii=False).encode("utf-16")
    if kind == "latin1":
        return json.dumps({"playbook": "é" + text, "name": "é"}, ensure_ascii=False).encode("latin-1", errors="replace")
    if kind == "bom":
        return b"\xef\xbb\xbf" + json.dumps({"playbook": text}).encode()
    if kind == "truncated":
        return json.dumps({"playbook": text, "scenario": SCENARIO}).encode()[:depth]
    if kind == "nul":
        return b'{"playbook": "a\x00b", "name": "\\u0000"}'
    return draw(st.binary(max_size=200))


_CONTENT_TYPES = st.sampled_from([
    "application/json", "application/json", "application/json; charset=utf-8", "application/json; charset=latin-1",
    "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "",
    None])


@st.composite
def query_string(draw: st.DrawFn) -> str:
    """Known parameters with any values (percent-encoded, or raw escapes such as %00 and %ff)."""
    pairs = []
    for name in draw(st.lists(st.sampled_from(QUERY_PARAMETERS + ("x", "")), max_size=4)):
        value = draw(st.one_of(
            st.sampled_from(["0", "1", "-1", "50", "201", "2147483647", "2147483648", "9" * 40, "1e400", "nan",
                             "0.05", "queued", "succeeded", "json", "html", "markdown", "coding-assistant"]),
            st.text(max_size=30).map(quote), st.sampled_from(["%00", "%ff", "a%00b", "%c3%28", "%", "%zz", "+"])))
        pairs.append(f"{name}={value}")
    return "&".join(pairs)


@st.composite
def path_id(draw: st.DrawFn, known: list[str]) -> str:
    """An id the service returned, or any text percent-encoded into the path."""
    if known and draw(st.booleans()):
        return draw(st.sampled_from(known))
    raw = draw(st.one_of(st.text(min_size=1, max_size=80), st.sampled_from(["\x00", "a\x00", "x" * 5000, "..", "é"]),
                         st.just("job_" + "0" * 16)))
    return quote(raw, safe="") if raw != ".." else "%2E%2E"


def _headers(draw: st.DrawFn, content_type: str | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    if content_type is not None:
        headers["content-type"] = content_type
    if draw(st.integers(0, 4)) == 0:
        headers["idempotency-key"] = draw(st.text(
            st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=300))
    if draw(st.integers(0, 6)) == 0:
        headers["last-event-id"] = draw(st.sampled_from(["0", "-1", "2147483648", "abc", "1" * 30]))
    return headers


@st.composite
def wild_requests(draw: st.DrawFn, job_ids: list[str], schedule_ids: list[str]) -> WildRequest:
    """One request to any route, built to reach the handler and then break its input."""
    route = draw(st.sampled_from(sorted(ROUTES)))
    method = draw(st.sampled_from(ROUTES[route]))
    path = route.replace("{job_id:str}", draw(path_id(job_ids))).replace(
        "{schedule_id:str}", draw(path_id(schedule_ids))).replace(
        "{calibration_id:str}", draw(path_id([]))).replace("{file_path:path}", draw(st.one_of(
            st.sampled_from(["ui.js", "vendor/d3.min.js", "nope.js", "..%2F..%2Froutes%2Fui.py", "%2E%2E/%2E%2E/x"]),
            path_id([]))))
    query = draw(query_string()) if method == "GET" or draw(st.booleans()) else ""
    if "/events" in route or route == "/v1/jobs/{job_id:str}":
        # A stream or long-poll of a live job lasts as long as the job: read ones that have finished.
        path = route.replace("{job_id:str}", draw(path_id(job_ids[:1])))
    if method in ("GET", "DELETE") or route.endswith("/cancel"):
        content_type = draw(st.sampled_from([None, None, "text/plain", "application/json"]))
        body = draw(st.sampled_from([None, None, b"", b"{}", b"x"])) if method != "GET" else None
        return WildRequest(method, path, query, _headers(draw, content_type), body)
    if route == "/v1/profiles":
        files = {"log": ("requests.jsonl", draw(st.binary(max_size=200)) if draw(st.booleans()) else
                         b'{"prompt": "hello", "completion": "hi"}\n'),
                 "tokenizer": ("tokenizer.json", draw(st.binary(max_size=200)))}
        if draw(st.booleans()):
            files.pop(draw(st.sampled_from(["log", "tokenizer"])))
        return WildRequest(method, path, query, {}, None, files)
    content_type = draw(_CONTENT_TYPES)
    body = draw(mutated_body(route)) if draw(st.integers(0, 3)) else draw(raw_body())
    return WildRequest(method, path, query, _headers(draw, content_type), body)
