"""Matplotlib figures for the summary page, one function per plot.

Every function takes history ``Record``s (or a regress ``Report``) and
returns a ``matplotlib.figure.Figure`` built without pyplot, so nothing here
touches global figure state and the Agg canvas is used whatever backend the
caller's matplotlib is configured with. ``save`` writes one to PNG.

Conventions: times are shown in µs (asv stores seconds). Colour means the
variant wherever variants are compared (the eager and torch.compile peers in
black and grey, the Triton variants in distinguishable tab10 colours, never
the flag red), and panels split the GPUs; lines carry their label at their
end, so a figure reads without its legend. Only the cross-GPU view colours
by GPU, since there the GPUs are what is compared.

``data`` reads the records, ``style`` holds what every figure shares (verdict
colours, variant colours and markers, canvas and axes); the figures are in
``kernel_history`` (history), ``verdicts`` (the regression matrix, detection
power) and ``comparisons`` (speedup, copy bandwidth, roofline, cross-GPU).
"""

from ltx2k.report.plots.comparisons import (
    copy_bandwidth,
    copy_ceilings,
    cross_gpu,
    roofline,
    speedup,
    speedup_baselines,
)
from ltx2k.report.plots.data import (
    ASV_CLASS_KERNEL,
    DEVICE_COLD,
    HOST_LATENCY,
    KERNEL_VARIANTS,
    METRIC_TITLES,
    current_version,
    kernels_in,
    ordered,
    report_row_kernel_metric,
    split_benchmark,
)
from ltx2k.report.plots.kernel_history import history
from ltx2k.report.plots.style import (
    FLAG_COLOURS,
    FLAG_IMPROVEMENT,
    FLAG_INSUFFICIENT,
    FLAG_OK,
    FLAG_REGRESSION,
    FLAG_WORDS,
    PEER_COLOURS,
    fit_to_contents,
    machine_colours,
    overflow,
    save,
    variant_colours,
)
from ltx2k.report.plots.verdicts import detection_power, regression_heatmap

__all__ = [
    "ASV_CLASS_KERNEL",
    "DEVICE_COLD",
    "FLAG_COLOURS",
    "FLAG_IMPROVEMENT",
    "FLAG_INSUFFICIENT",
    "FLAG_OK",
    "FLAG_REGRESSION",
    "FLAG_WORDS",
    "HOST_LATENCY",
    "KERNEL_VARIANTS",
    "METRIC_TITLES",
    "PEER_COLOURS",
    "copy_bandwidth",
    "copy_ceilings",
    "cross_gpu",
    "current_version",
    "detection_power",
    "fit_to_contents",
    "history",
    "kernels_in",
    "machine_colours",
    "ordered",
    "overflow",
    "regression_heatmap",
    "report_row_kernel_metric",
    "roofline",
    "save",
    "speedup",
    "speedup_baselines",
    "split_benchmark",
    "variant_colours",
]
