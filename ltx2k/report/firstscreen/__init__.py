"""The summary page's first screen: what a kernel engineer asks first, per GPU.

For the selected GPU, one table per kernel: rows are shapes, columns come
from :data:`COLUMNS` (metric -> title, unit; direction from
:mod:`ltx2k.analysis.thresholds`), each value taken from the GPU's latest
commit for the kernel's default variant (the public function's ``variant=``
default), with a sparkline of that GPU's last commits. Each cell is
coloured by the regression report's verdict and names its change-point
commit; its tooltip names the result file and machine it came from.

Everything here is derived from the records and the report: kernels and
default variants from :data:`ltx2k.workload.cases.KERNELS`, shapes from the results.
``views`` builds that data (:func:`build_views`), ``markup`` writes it as HTML
(:func:`render`, :func:`status_line`).
"""

from ltx2k.report.firstscreen.markup import (
    NOT_MEASURED,
    SCRIPT,
    render,
    status_line,
    table_id,
)
from ltx2k.report.firstscreen.views import (
    COLUMNS,
    Column,
    KernelTable,
    MachineView,
    Provenance,
    ScreenCell,
    anchor,
    build_views,
    default_variant,
    fmt,
)

__all__ = [
    "COLUMNS",
    "NOT_MEASURED",
    "SCRIPT",
    "Column",
    "KernelTable",
    "MachineView",
    "Provenance",
    "ScreenCell",
    "anchor",
    "build_views",
    "default_variant",
    "fmt",
    "render",
    "status_line",
    "table_id",
]
