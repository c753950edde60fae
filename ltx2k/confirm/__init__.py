"""``ltx2k confirm``: re-measure a flagged step on this runner, and bisect it to one commit."""

from ltx2k.confirm.orchestrate import confirm, run
from ltx2k.confirm.report import EXIT_CONFIRMED, EXIT_ERROR, EXIT_OK, Outcome, write_outputs
from ltx2k.confirm.targets import Target

__all__ = [
    "EXIT_CONFIRMED",
    "EXIT_ERROR",
    "EXIT_OK",
    "Outcome",
    "Target",
    "confirm",
    "run",
    "write_outputs",
]
