"""Upload a request log and a tokenizer; get the workload profile."""

from __future__ import annotations

import json
from pathlib import Path

from litestar.testing import TestClient
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from tests.api.fakes import auth


def _tokenizer(tmp_path: Path) -> bytes:
    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.train_from_iterator([" ".join(f"w{i}" for i in range(50))], trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path.read_bytes()


def test_profile_of_an_uploaded_log(client: TestClient, tokens: dict[str, str], tmp_path: Path) -> None:
    shared = " ".join(f"w{i}" for i in range(20))
    lines = [json.dumps({"prompt": f"{shared} w{40 + n % 5}", "completion": "w1 w2 w3"}) for n in range(10)]
    files = {"log": ("requests.jsonl", "\n".join(lines).encode()), "tokenizer": ("tokenizer.json", _tokenizer(tmp_path))}
    response = client.post("/v1/profiles", files=files, headers=auth(tokens["write"]))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["requests"] == 10 and body["skipped_lines"] == 0
    assert body["input_median"] == 21 and body["output_median"] == 3
    assert body["prefix_sharing_rate"] > 0.5  # 20 of 21 tokens are a shared prefix


def test_profile_needs_a_usable_log(client: TestClient, tokens: dict[str, str], tmp_path: Path) -> None:
    files = {"log": ("requests.jsonl", b"not json\n"), "tokenizer": ("tokenizer.json", _tokenizer(tmp_path))}
    response = client.post("/v1/profiles", files=files, headers=auth(tokens["write"]))
    assert response.status_code == 422 and response.json()["field"] == "log"
