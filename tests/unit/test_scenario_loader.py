"""Scenario files decode strictly: errors name the file, the line and the nearest valid key."""

from pathlib import Path

import pytest

from service.scenario import InputFileError, load_scenario, parse_scenario
from service.scenario_check import check_scenario

EXAMPLE = Path(__file__).parents[2] / "examples" / "casebook" / "coding-assistant-final.toml"


def _with(tmp_path: Path, old: str, new: str) -> Path:
    text = EXAMPLE.read_text()
    assert old in text
    path = tmp_path / "scenario.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def _refused(path: Path) -> InputFileError:
    with pytest.raises(InputFileError) as info:
        load_scenario(path)
    return info.value


def _line_of(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_the_casebook_final_scenario_loads():
    scenario = load_scenario(EXAMPLE)
    assert scenario.model == "Qwen/Qwen3.6-27B"
    assert scenario.deployment.groups[0].replicas == 4
    assert scenario.deployment.router is not None and scenario.deployment.router.policy == "cache_aware"
    assert scenario.slo.ttft_p95_ms == 1000


def test_misspelled_server_flag_names_file_line_and_nearest_key(tmp_path):
    path = _with(tmp_path, "chunked-prefill-size = 4096", "chunked-prefil-size = 4096")
    with pytest.raises(InputFileError) as info:
        load_scenario(path)
    err = info.value
    assert err.file == str(path)
    assert err.line == _line_of(path, "chunked-prefil-size")
    assert "did you mean `chunked-prefill-size`" in str(err)
    assert err.field == "deployment.groups[0].server.chunked-prefil-size"


def test_an_sglang_flag_the_server_table_does_not_model_is_pointed_to_extra(tmp_path):
    # `--context-length` is a real SGLang flag, but not one of the table's keys: the refusal says where it goes.
    path = _with(tmp_path, "tp-size = 2", "tp-size = 2\ncontext-length = 32768")
    with pytest.raises(InputFileError) as info:
        load_scenario(path)
    err = info.value
    assert err.field == "deployment.groups[0].server.context-length"
    assert err.line == _line_of(path, "context-length")
    assert err.hint.startswith("valid keys: ")
    assert err.hint.endswith("any other SGLang flag goes under `extra`, keyed by the flag as it is typed: "
                             '"--context-length" = 32768')
    # Spelled with underscores, or with a value no flag takes (a date), the hint still names the flag as typed.
    for line, tail in (("context_length = 32768", '"--context-length" = 32768'),
                       ("watchdog-timeout = 1979-05-27", '"--watchdog-timeout"'),
                       ('log-level = "info"', '"--log-level" = "info"')):
        with pytest.raises(InputFileError) as info:
            load_scenario(_with(tmp_path, "tp-size = 2", f"tp-size = 2\n{line}"))
        assert info.value.hint.endswith(tail), info.value.hint
    fixed = _with(tmp_path, "tp-size = 2", 'tp-size = 2\nextra = { "--context-length" = 32768 }')
    assert load_scenario(fixed).deployment.groups[0].server.extra == {"--context-length": 32768}


def test_a_real_flag_near_a_table_key_is_not_only_called_a_misspelling(tmp_path):
    # `disable-cuda-graph` is SGLang's own flag and lies near the table's `disable-radix-cache`: the hint offers
    # both readings, and the flag under `extra` then meets the version check (deprecated in 0.5.23, replaced).
    path = _with(tmp_path, "tp-size = 2", "tp-size = 2\ndisable-cuda-graph = true")
    with pytest.raises(InputFileError) as info:
        load_scenario(path)
    assert info.value.hint == ("did you mean `disable-radix-cache`? --disable-cuda-graph is an SGLang flag: it "
                               'goes under `extra`, keyed by the flag as it is typed: "--disable-cuda-graph" = true')
    # A misspelt table key that is no SGLang flag gets the near key alone.
    with pytest.raises(InputFileError) as typo:
        load_scenario(_with(tmp_path, "tp-size = 2", "tp_sise = 2"))
    assert typo.value.hint == "did you mean `tp-size`?"
    fixed = _with(tmp_path, "tp-size = 2", 'tp-size = 2\nextra = { "--disable-cuda-graph" = true }')
    issues = check_scenario(load_scenario(fixed))
    assert any(i.field.endswith('extra."--disable-cuda-graph"') or "--disable-cuda-graph" in i.message
               for i in issues), issues
    assert any("--cuda-graph-backend-decode disabled" in (i.hint or "") for i in issues), issues


def test_an_sglang_flag_a_typed_key_sets_is_pointed_to_that_key_not_to_extra(tmp_path):
    # SGLang's `--enable-dp-attention --dp-size 8` is one key here; `extra` refuses flags a typed field owns, so
    # the hint that sent them there led to a second refusal.
    for line in ("enable-dp-attention = true", "attn-dp-size = 8"):
        with pytest.raises(InputFileError) as info:
            load_scenario(_with(tmp_path, "tp-size = 2", f"tp-size = 2\n{line}"))
        assert info.value.hint == ("attention DP is one key here: attention-dp-size = N for SGLang's "
                                   "--enable-dp-attention --dp-size N (leave dp-size unset; the launch command "
                                   "spells it for the scenario's SGLang version)")
    with pytest.raises(InputFileError) as graphs:
        load_scenario(_with(tmp_path, "tp-size = 2", "tp-size = 2\ncuda-graph-max-bs-decode = 64"))
    assert graphs.value.hint == ("--cuda-graph-max-bs-decode is set through `cuda-graph-max-bs` here; the launch "
                                 "command spells it for the scenario's SGLang version")
    # Flags the deployment itself sets point to the key that sets them, not to `extra` (which refuses them).
    with pytest.raises(InputFileError) as mode:
        load_scenario(_with(tmp_path, "tp-size = 2", 'tp-size = 2\ndisaggregation-mode = "prefill"'))
    assert mode.value.hint == ('the group\'s role sets --disaggregation-mode: role = "prefill" or role = "decode" '
                               "on its [[deployment.groups]] entry, with a [deployment.router] in front")
    with pytest.raises(InputFileError) as port:
        load_scenario(_with(tmp_path, "tp-size = 2", "tp-size = 2\nport = 31000"))
    assert port.value.hint == "--port comes from the group's base_port: the launch command spells it"
    fixed = load_scenario(_with(tmp_path, "tp-size = 2", "tp-size = 2\nattention-dp-size = 2"))
    assert fixed.deployment.groups[0].server.attention_dp_size == 2
    # Outside a server table the flag words mean nothing: a `tp-size` under [hardware] gets the table's keys.
    with pytest.raises(InputFileError) as misplaced:
        load_scenario(_with(tmp_path, "nodes = 1", "nodes = 1\ntp-size = 2"))
    assert "set through" not in misplaced.value.hint and "extra" not in misplaced.value.hint


def test_unknown_key_inside_an_inline_table_is_located(tmp_path):
    path = _with(tmp_path, "output = { median = 400, p95 = 1800 }", "output = { median = 400, p96 = 1800 }")
    with pytest.raises(InputFileError) as info:
        load_scenario(path)
    assert info.value.line == _line_of(path, "p96")
    assert "`p95`" in str(info.value)


def test_wrong_type_names_the_field_and_line(tmp_path):
    path = _with(tmp_path, "replicas = 4", 'replicas = "four"')
    with pytest.raises(InputFileError) as info:
        load_scenario(path)
    assert info.value.field == "deployment.groups[0].replicas"
    assert info.value.line == _line_of(path, 'replicas = "four"')
    assert "Expected `int`" in str(info.value)


def test_a_value_outside_a_choice_lists_the_choices_and_the_nearest(tmp_path):
    error = _refused(_with(tmp_path, 'kind = "latency"', 'kind = "latncy"'))
    assert error.field == "objective.kind"
    assert error.line == _line_of(tmp_path / "scenario.toml", 'kind = "latncy"')
    assert error.hint is not None and error.hint.startswith('did you mean "latency"? valid values: ')
    assert '"throughput"' in error.hint and '"cost"' in error.hint
    # A choice inside an inline table, whose value matches none of them closely.
    error = _refused(_with(tmp_path, "[workload]", '[workload]\nstructured_output = { mode = "constrained" }'))
    assert error.field == "workload.structured_output.mode"
    assert error.hint == 'valid values: "json_schema", "none", "prompt_only"'


def test_a_missing_required_field_is_named_in_the_fix(tmp_path):
    error = _refused(_with(tmp_path, "[workload]", '[[quality]]\nsubject = "fp8"\n\n[workload]'))
    assert error.field == "quality[0]"
    assert error.hint == "add `metrics` to it"


def test_unknown_top_level_table(tmp_path):
    path = _with(tmp_path, "[slo]", "[sla]")
    with pytest.raises(InputFileError, match="unknown key `sla` in the top level .*did you mean `slo`"):
        load_scenario(path)


def test_toml_syntax_error_carries_its_line():
    with pytest.raises(InputFileError) as info:
        parse_scenario('name = "x"\nmodel = \n', source="inline.toml")
    assert info.value.line == 2
    assert str(info.value).startswith("inline.toml:2")


def test_missing_file_says_what_to_pass(tmp_path):
    with pytest.raises(InputFileError, match="examples/casebook"):
        load_scenario(tmp_path / "nope.toml")
