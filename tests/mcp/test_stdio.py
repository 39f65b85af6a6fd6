"""Drive `sglang-tuner mcp` over stdio with the mcp SDK's own client, as an agent would."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).parents[2]
CASE1 = (ROOT / "tests" / "unit" / "diagnosis" / "fixtures" / "case1_round0.txt").read_text()
SCENARIO = ROOT / "examples" / "casebook" / "coding-assistant-final.toml"
SYSTEM = " ".join(f"w{i}" for i in range(40))


def _server() -> StdioServerParameters:
    command = shutil.which("sglang-tuner", path=str(Path(sys.executable).parent)) or "sglang-tuner"
    return StdioServerParameters(command=command, args=["mcp"], cwd=str(ROOT), env={"SGLANG_TUNER_URL": ""})


def _log() -> str:
    lines = [{"prompt": f"{SYSTEM} w{50 + i} w{60 + i}", "completion": "w1 w2 w3 w4"} for i in range(4)]
    return "\n".join(json.dumps(line) for line in lines) + "\n"


def test_an_agent_session_over_stdio(tokenizer_dir: Path) -> None:
    async def session() -> None:
        async with Client(_server(), read_timeout_seconds=60) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            assert names == ["profile_workload", "plan_capacity", "diagnose_benchmark", "recommend_playbook",
                             "start_tuning_job", "get_job", "list_rounds", "explain_decision", "cancel_job",
                             "render_launch_commands", "validate_config", "compare_rounds"]

            profiled = await client.call_tool("profile_workload", {"log_text": _log(), "tokenizer": str(tokenizer_dir)})
            assert not profiled.is_error, profiled.content
            data = profiled.structured_content["data"]
            assert data["requests"] == 4
            assert data["input_median"] == 42
            assert data["prefix_sharing_rate"] > 0.7

            diagnosed = await client.call_tool("diagnose_benchmark", {"bench_output": CASE1})
            assert not diagnosed.is_error
            diagnosis = diagnosed.structured_content["data"]
            assert diagnosis["next_technique"] == "chunked_prefill"
            findings = {f["id"]: f for f in diagnosis["findings"]}
            assert findings["ttft_tail_blocking"]["evidence"]["p99_over_median"] >= 7
            assert findings["itl_stall"]["evidence"]["max_itl_ms"] == 982.51
            assert findings["itl_stall"]["technique"] == "chunked_prefill"

            rendered = await client.call_tool("render_launch_commands", {"scenario_toml": SCENARIO.read_text()})
            assert not rendered.is_error, rendered.content
            launch = rendered.structured_content["data"]
            assert [w["env"]["CUDA_VISIBLE_DEVICES"] for w in launch["workers"]] == ["0,1", "2,3", "4,5", "6,7"]
            assert "--chunked-prefill-size" in launch["workers"][0]["argv"]
            assert launch["router"]["argv"][:3] == ["python", "-m", "sglang_router.launch_router"]

    anyio.run(session)
