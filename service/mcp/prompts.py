"""Prompt templates that walk an agent through the casebook's procedure with the tools."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PromptTemplate:
    """A named prompt with its arguments and text."""

    name: str
    description: str
    arguments: tuple[tuple[str, str, bool], ...]  # (name, description, required)
    template: str

    def render(self, values: dict[str, str]) -> str:
        """Fill the template; missing optional arguments read as 'not given'.

        Raises:
            KeyError: a required argument is missing.
        """
        filled = {}
        for name, _, required in self.arguments:
            if required and not values.get(name):
                raise KeyError(f"prompt {self.name!r} needs the argument {name!r}")
            filled[name] = values.get(name) or "not given"
        return self.template.format(**filled)


PROMPTS = (
    PromptTemplate(
        "tune my deployment",
        "Tune an SGLang deployment to its SLO the casebook's way, one technique per round.",
        (("scenario", "The scenario TOML or a path to it (model, hardware, deployment, workload, SLO).", True),
         ("logs", "Path to a request log to profile first.", False)),
        "Tune this SGLang deployment to its SLO.\nScenario: {scenario}\nRequest log: {logs}\n\n"
        "Follow the casebook: requirements and SLO -> traffic profile -> model selection -> capacity -> "
        "benchmark -> diagnosis -> tuning rounds.\n"
        "1. If a log is given, call profile_workload and put its figures in the scenario's workload.\n"
        "2. Call validate_config, then plan_capacity for the model and GPUs.\n"
        "3. Call recommend_playbook, then start_tuning_job with that playbook and the scenario.\n"
        "4. Poll get_job until the state is terminal; read list_rounds and explain_decision for each round.\n"
        "5. Finish with render_launch_commands for the final deployment and state which SLOs are met.",
    ),
    PromptTemplate(
        "why is my p99 TTFT high",
        "Diagnose a high P99 TTFT from a bench_serving result and a /metrics scrape.",
        (("bench_output", "The bench_serving result block or its JSON line.", True),
         ("metrics", "The server's /metrics scrape.", False)),
        "My P99 TTFT is high. bench_serving output:\n{bench_output}\n\n/metrics scrape:\n{metrics}\n\n"
        "Call diagnose_benchmark with these. Read the findings in the casebook's order: a P99/median TTFT "
        "ratio of 3x or more means long prompts block short ones (chunked prefill); a max ITL of several hundred "
        "ms is a stall from prefill insertion or preemption; a cache hit rate well below the sharing rate is a "
        "prompt-structure or routing problem. Explain the evidence, quote the casebook rule, and name the "
        "technique to try next.",
    ),
)


def prompt_named(name: str) -> PromptTemplate:
    """The prompt called `name`.

    Raises:
        KeyError: no such prompt; the message lists the known ones.
    """
    for prompt in PROMPTS:
        if prompt.name == name:
            return prompt
    raise KeyError(f"no prompt {name!r}; known: {', '.join(p.name for p in PROMPTS)}")
