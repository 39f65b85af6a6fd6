"""Profiles: upload a JSON-lines request log and a tokenizer.json, get the workload profile back."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated

import msgspec
from litestar import post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body

from service.api.admission import BODY_OPT
from service.api.auth import SECURITY
from service.api.problems import Problem, problem_responses
from service.api.runtime import DEFAULT_MAX_UPLOAD_BYTES
from service.domain import MeasuredProfile
from service.profile import ProfileError, SegmentTokenizer, TokenizerNotFound, profile_log


class ProfileUpload(msgspec.Struct, kw_only=True):
    """The log (one JSON object per request) and the model's tokenizer.json."""

    log: UploadFile
    tokenizer: UploadFile
    page_size: int = 1


async def _save(upload: UploadFile, path: Path) -> None:
    path.write_bytes(await upload.read())


@post("/v1/profiles", operation_id="createProfile", opt={"scope": "write", BODY_OPT: "multipart"}, security=SECURITY,
      status_code=200,
      tags=["profiles"], request_max_body_size=DEFAULT_MAX_UPLOAD_BYTES,
      responses=problem_responses(400, 401, 403, 413, 415, 422))
async def create_profile(
    data: Annotated[ProfileUpload, Body(media_type=RequestEncodingType.MULTI_PART)],
) -> MeasuredProfile:
    """Lengths (median, p95), prefix sharing, radix reuse, peak concurrency and request rate of a log."""
    if data.page_size < 1:
        raise Problem(422, "invalid-field", "Invalid request field", "page_size must be at least 1",
                      field="page_size", hint="the server's --page-size, 1 when unsure")
    with tempfile.TemporaryDirectory(prefix="sglang-tuner-profile-") as folder:
        log, tokenizer = Path(folder) / "requests.jsonl", Path(folder) / "tokenizer.json"
        await _save(data.log, log)
        await _save(data.tokenizer, tokenizer)
        segmenter = await _tokenizer(tokenizer, folder)
        try:
            # Tokenising a large log is CPU work: keep it off the event loop that serves every other request.
            return await asyncio.to_thread(profile_log, log, segmenter, page_size=data.page_size)
        except (ProfileError, ValueError) as exc:
            raise Problem(422, "invalid-log", "Unusable request log", _without_paths(exc, folder), field="log",
                          hint="one JSON object per line with prompt/messages and completion") from exc


async def _tokenizer(path: Path, folder: str) -> SegmentTokenizer:
    try:
        return await asyncio.to_thread(SegmentTokenizer.from_path, path)
    except Exception as exc:  # noqa: BLE001 - the tokenizers library raises a bare Exception for any unreadable file
        detail = _without_paths(exc, folder) if isinstance(exc, TokenizerNotFound) else \
            f"the uploaded tokenizer is not a tokenizer.json the tokenizers library reads: {_without_paths(exc, folder)}"
        raise Problem(422, "invalid-tokenizer", "Unusable tokenizer", detail, field="tokenizer",
                      hint="upload the model's tokenizer.json") from exc


def _without_paths(exc: Exception, folder: str) -> str:
    """The error's message with the server's temporary folder left out: the uploads are named as sent."""
    message = str(exc)
    for name, field in (("requests.jsonl", "log"), ("tokenizer.json", "tokenizer")):
        message = message.replace(str(Path(folder) / name), f"the uploaded {field}")
    return message.replace(folder, "the upload")
