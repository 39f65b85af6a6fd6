"""The casebook's five starting points as Python scenarios, for technique rule tests (no simulator needed).

They ship with the contract suites (`service.testing.scenarios`), so a plugin's tests see the same cases.
"""

from service.testing.scenarios import (
    CASES,
    coding_assistant,
    document_qa,
    moe_at_scale,
    nightly_batch,
    structured_output,
)
from service.testing.scenarios import casebook_context as context

__all__ = ["CASES", "coding_assistant", "context", "document_qa", "moe_at_scale", "nightly_batch",
           "structured_output"]
