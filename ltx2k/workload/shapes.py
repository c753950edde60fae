"""Benchmark shapes, read from the data file ``shapes.json`` next to this (docs/shapes.md).

The kernels' variants are in ``ltx2k/workload/variants.py``. The data file is
**append-only**: a shape's label is the key of its asv history, so renaming or
reordering one silently orphans that history. New entries go at the end of
``shapes``; a new shape's label goes at the end of a ``metric_shapes`` list.

This module uses the standard library only and finds the data file next to
itself: ``benchmarks/bench_kernels.py`` loads it by path from the working
tree, without importing the package (see there why).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

DATA_FILE = Path(__file__).with_name("shapes.json")
FORMAT = "ltx2k-shapes/1"

# RoPE's cos/sin layouts. Both are [B, H, S, D/2] views: "token_major" is stored
# as [B, S, H, D/2] (what LTX-2 passes: a transposed view), "head_major" as a
# contiguous [B, H, S, D/2]. Every shape before the layout was data is token-major.
DEFAULT_LAYOUT = "token_major"
LAYOUTS = (DEFAULT_LAYOUT, "head_major")
TABLE_DTYPES = ("bf16", "fp32")
# Which list a shape is in: timed on GPUs, or run by the CPU interpreter
# (machine "cpu-interpreter"), ~1e5x slower, where production shapes would take hours.
RUNS_ON = ("gpu", "cpu-interpreter")
# Where a shape came from: "hand-picked", or "<kind>: <what>", e.g.
# "recorded: ltx2_calls.json" (a recorder file) or "model config: <url or file>".
SOURCE_KINDS = ("hand-picked", "recorded", "model config")
# Metrics timed only at the shapes listed for them (each list is append-only):
# every other metric times every shape of the machine's list.
#   host_calibrated  shapes whose call costs more host than device time, so that host
#                    latency is what a caller waits on (one per launch path the default
#                    variant takes; AdaLN's table dtype changes it)
#   kernel           CUPTI kernel duration: decode shapes, where graph-replay device time
#                    is mostly the graph's launch floor, and one shape of 10 us or more
#                    per kernel, where the two metrics must agree
#   device_warm, host, host_launch, allocations
#                    warm-L2 device time, host latency per variant and per launch path,
#                    allocations per call: the shapes from before this list was data; a
#                    production shape added for its cold-L2 device time (and % of copy
#                    bandwidth, derived from it) costs the suite no process for these
#   device_launch    cold-L2 device time of the default variant through each host launch
#                    path (PDL makes it depend on the path): decode shapes and one mid shape
#   host_context     host latency of the default variant in each call context
#                    (ltx2k/workload/contexts.py): decode shapes, where the host path is
#                    the call's cost
OPT_IN_METRICS = (
    "host_calibrated",
    "kernel",
    "device_warm",
    "host",
    "host_launch",
    "allocations",
    "host_context",
    "device_launch",
)
# What every shape of a list is timed for: cold-L2 device time, and % of copy bandwidth
# derived from it.
EVERY_SHAPE_METRICS = ("device_cold", "pct_copy_bandwidth")


@dataclass(frozen=True)
class RopeShape:
    B: int
    S: int
    H: int
    D: int
    layout: str = DEFAULT_LAYOUT
    source: str = field(default="hand-picked", compare=False)

    @property
    def label(self) -> str:
        # The default layout is not in the label: the labels (and asv histories)
        # from before the layout was data stay as they were.
        base = f"B{self.B}_S{self.S}_H{self.H}_D{self.D}"
        return base if self.layout == DEFAULT_LAYOUT else f"{base}_{self.layout}"

    def check(self) -> None:
        if self.D % 2:
            raise ValueError(f"head dim D must be even (split halves), got {self.D}")


@dataclass(frozen=True)
class AdaShape:
    B: int
    S: int
    D: int
    table_dtype: str = "bf16"  # "bf16" or "fp32"
    source: str = field(default="hand-picked", compare=False)

    @property
    def label(self) -> str:
        return f"B{self.B}_S{self.S}_D{self.D}_{self.table_dtype}"

    def check(self) -> None:
        pass


def _pair_label(s) -> str:
    base = f"B{s.B}_Sq{s.Sq}_Sk{s.Sk}_H{s.H}_D{s.D}"
    if s.shared:
        base += "_shared"
    return base if s.layout == DEFAULT_LAYOUT else f"{base}_{s.layout}"


def _check_pair(s) -> None:
    if s.D % 2:
        raise ValueError(f"head dim D must be even (split halves), got {s.D}")
    if s.shared and s.Sq != s.Sk:
        raise ValueError(
            f"shared cos/sin need Sq == Sk (one [B, H, S, D/2] pair for q and k), "
            f"got Sq={s.Sq}, Sk={s.Sk}"
        )


@dataclass(frozen=True)
class PairShape:
    """Split RoPE of an attention's q and k: q [B, Sq, H*D], k [B, Sk, H*D], each with its
    own cos/sin ([B, H, Sq, D/2] and [B, H, Sk, D/2], both in ``layout``). ``shared``: the
    call passes the very same cos/sin tensors for q and k (self-attention, Sq == Sk), and
    the kernel reads them once. Sq != Sk is a cross-attention (video queries, audio keys)."""

    B: int
    Sq: int
    Sk: int
    H: int
    D: int
    layout: str = DEFAULT_LAYOUT
    shared: bool = False
    source: str = field(default="hand-picked", compare=False)

    @property
    def label(self) -> str:
        # The default layout is not in the label, as for split RoPE; shared cos/sin are.
        return _pair_label(self)

    def check(self) -> None:
        _check_pair(self)


@dataclass(frozen=True)
class QKNormPairShape:
    """A :class:`PairShape` of the fused prologue: RMSNorm of q and of k over the hidden
    size H*D, with [H*D] weights of ``weight_dtype`` (the attention's q_norm and k_norm
    parameters), then split RoPE of each. eps is the model's, 1e-6."""

    B: int
    Sq: int
    Sk: int
    H: int
    D: int
    layout: str = DEFAULT_LAYOUT
    shared: bool = False
    weight_dtype: str = "bf16"  # "bf16" or "fp32"
    source: str = field(default="hand-picked", compare=False)

    @property
    def label(self) -> str:
        # bf16 weights, as LTX-2 holds them, are not in the label; fp32 ones are.
        base = _pair_label(self)
        return base if self.weight_dtype == "bf16" else f"{base}_w{self.weight_dtype}"

    def check(self) -> None:
        _check_pair(self)


# Per kernel: its shape type and the entry fields beyond kernel, runs_on and source, in
# the data file's order. A kernel's shapes are one entry here and its lines in the file.
KERNEL_FIELDS: dict[str, tuple[type, tuple[str, ...]]] = {
    "split_rope": (RopeShape, ("B", "S", "H", "D", "layout")),
    "ada_values9": (AdaShape, ("B", "S", "D", "table_dtype")),
    "split_rope_pair": (PairShape, ("B", "Sq", "Sk", "H", "D", "layout", "shared")),
    "qknorm_rope_pair": (
        QKNormPairShape,
        ("B", "Sq", "Sk", "H", "D", "layout", "shared", "weight_dtype"),
    ),
}
# The fields that name one of a few choices, and the choices; every other field is a
# positive integer, or a boolean where it is one of BOOL_FIELDS.
CHOICES = {"layout": LAYOUTS, "table_dtype": TABLE_DTYPES, "weight_dtype": TABLE_DTYPES}
BOOL_FIELDS = ("shared",)


def check_source(source: object) -> str:
    """*source* if it is "hand-picked" or "<kind>: <what>" with a known kind; else ValueError."""
    if not isinstance(source, str):
        raise ValueError(f"source must be a string, got {source!r}")
    kind, sep, what = source.partition(": ")
    if source == "hand-picked" or (sep and what.strip() and kind in SOURCE_KINDS[1:]):
        return source
    raise ValueError(
        f"source must be 'hand-picked', 'recorded: FILE' or 'model config: WHERE', got {source!r}"
    )


def shape_from_fields(kernel: str, values: dict, source: str = "hand-picked"):
    """The shape of *kernel* with these field values; ValueError saying which one is wrong."""
    if not isinstance(kernel, str):
        raise ValueError(f"kernel must be a string, got {type(kernel).__name__} {kernel!r}")
    if kernel not in KERNEL_FIELDS:
        raise ValueError(f"unknown kernel {kernel!r} (known: {', '.join(KERNEL_FIELDS)})")
    cls, names = KERNEL_FIELDS[kernel]
    for name in names:
        if name not in values:
            raise ValueError(f"{kernel} shape has no {name!r}")
    for name in names:
        v = values[name]
        if name in CHOICES:
            if v not in CHOICES[name]:
                raise ValueError(f"{name} must be one of {CHOICES[name]}, got {v!r}")
        elif name in BOOL_FIELDS:
            if not isinstance(v, bool):
                raise ValueError(f"{name} must be true or false, got {v!r}")
        elif isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    shape = cls(**{n: values[n] for n in names}, source=check_source(source))
    shape.check()
    return shape


def entry(kernel: str, shape, runs_on: str = "gpu") -> dict:
    """The data file's entry of *shape*, keys in the file's order."""
    _, names = KERNEL_FIELDS[kernel]
    return {
        "kernel": kernel,
        "runs_on": runs_on,
        **{n: getattr(shape, n) for n in names},
        "source": shape.source,
    }


@dataclass(frozen=True)
class SuiteShapes:
    """The data file, read and checked: shapes per (kernel, runs_on), in file order."""

    shapes: dict[tuple[str, str], tuple]
    metric_shapes: dict[str, dict[str, tuple]]
    raw: dict = field(compare=False, repr=False)

    def labels(self, kernel: str) -> set[str]:
        return {s.label for r in RUNS_ON for s in self.shapes[(kernel, r)]}

    def metrics_of(self, kernel: str, shape) -> tuple[str, ...]:
        return tuple(m for m in OPT_IN_METRICS if shape in self.metric_shapes[m][kernel])


def parse(data: object, where: str, check: Callable | None = None) -> SuiteShapes:
    """Check a data file's content; every error names *where* and the entry.

    *check(kernel, shape)*: a ValueError where a kernel cannot run *shape* (the command
    line passes the limits ``shapes add`` applies, which need torch; this module does not).
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"{where}: not an ltx2k shapes file (needs format {FORMAT!r})")
    entries = data.get("shapes")
    if not isinstance(entries, list):
        raise ValueError(f"{where}: 'shapes' must be a list")
    lists: dict[tuple[str, str], list] = {(k, r): [] for k in KERNEL_FIELDS for r in RUNS_ON}
    seen: dict[tuple[str, str], int] = {}
    for i, e in enumerate(entries):
        at = f"{where}: shapes[{i}]"
        if not isinstance(e, dict):
            raise ValueError(f"{at}: must be an object, got {e!r}")
        kernel, runs_on = e.get("kernel"), e.get("runs_on")
        if runs_on not in RUNS_ON:
            raise ValueError(f"{at}: runs_on must be one of {RUNS_ON}, got {runs_on!r}")
        try:
            shape = shape_from_fields(kernel, e, e.get("source"))
            if check is not None:
                check(kernel, shape)
        except ValueError as err:
            raise ValueError(f"{at}: {err}") from None
        extra = set(e) - set(entry(kernel, shape, runs_on))
        if extra:
            raise ValueError(f"{at}: unknown key(s) {sorted(extra)}")
        if (kernel, shape.label) in seen:  # labels are unique per kernel: find_shape, asv
            j = seen[(kernel, shape.label)]
            raise ValueError(f"{at}: {kernel} label {shape.label} repeats shapes[{j}]")
        seen[(kernel, shape.label)] = i
        lists[(kernel, runs_on)].append(shape)
    metric_shapes: dict[str, dict[str, tuple]] = {}
    opt_in = data.get("metric_shapes")
    if not isinstance(opt_in, dict) or set(opt_in) != set(OPT_IN_METRICS):
        raise ValueError(f"{where}: 'metric_shapes' must have exactly {list(OPT_IN_METRICS)}")
    for metric in OPT_IN_METRICS:
        per_kernel = opt_in[metric]
        # A kernel the list does not name has no shape in it (a new kernel needs no line).
        if not isinstance(per_kernel, dict) or not set(per_kernel) <= set(KERNEL_FIELDS):
            raise ValueError(
                f"{where}: metric_shapes.{metric} must map kernels of {list(KERNEL_FIELDS)} "
                f"to labels"
            )
        metric_shapes[metric] = {kernel: () for kernel in KERNEL_FIELDS}
        for kernel, labels in per_kernel.items():
            gpu = {s.label: s for s in lists[(kernel, "gpu")]}
            at = f"{where}: metric_shapes.{metric}.{kernel}"
            if not isinstance(labels, list):
                raise ValueError(f"{at}: must be a list of labels")
            for label in labels:
                if not isinstance(label, str):
                    raise ValueError(
                        f"{at}: labels must be strings, got {type(label).__name__} {label!r}"
                    )
                if label not in gpu:
                    raise ValueError(f"{at}: {label!r} is not a gpu shape of {kernel}")
            metric_shapes[metric][kernel] = tuple(gpu[label] for label in labels)
    return SuiteShapes({k: tuple(v) for k, v in lists.items()}, metric_shapes, data)


def load(path: str | os.PathLike = DATA_FILE, check: Callable | None = None) -> SuiteShapes:
    """The data file at *path*, checked (:func:`parse`, *check* as there)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{path}: cannot read the shapes file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a shapes file (not UTF-8 text)") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON: {e}") from None
    except (ValueError, RecursionError) as e:
        # Valid JSON that json.loads still refuses: an integer past Python's digit limit
        # (ValueError), or nesting past the recursion limit. Named with the file, as above.
        raise ValueError(f"{path}: cannot read the shapes file: {str(e).splitlines()[0]}") from None
    return parse(data, str(path), check)


def dumps(data: dict) -> str:
    """The data file's text: one shape per line, so that appending one is a one-line diff."""
    lines = ["{"]
    for key in data:
        value = data[key]
        if key == "shapes":
            items = [f"    {json.dumps(e)}" for e in value]
            lines.append('  "shapes": [\n' + ",\n".join(items) + "\n  ],")
        elif key == "metric_shapes":
            metrics = []
            for metric, per_kernel in value.items():
                kernels = [f'      "{k}": {json.dumps(v)}' for k, v in per_kernel.items()]
                metrics.append(f'    "{metric}": {{\n' + ",\n".join(kernels) + "\n    }")
            lines.append('  "metric_shapes": {\n' + ",\n".join(metrics) + "\n  },")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    lines[-1] = lines[-1].rstrip(",")
    return "\n".join(lines) + "\n}\n"


def append(
    entries: list[dict],
    path: str | os.PathLike = DATA_FILE,
    metrics: Iterable[tuple[str, str, str]] = (),
    check: Callable | None = None,
) -> SuiteShapes:
    """Append *entries* to the data file at *path* and return what it then holds.

    *metrics*: ``(metric, kernel, label)`` to append to an opt-in metric's list (a shape
    recorded in the model's call context joins ``host_context``), where not there yet.
    *check*: as for :func:`parse`.
    The new content is checked in full before anything is written, and it replaces the
    file in one rename: the file is the old one or the new one, never half of either.
    """
    path = Path(path)
    old = load(path, check)
    data = dict(old.raw)
    data["shapes"] = [*old.raw["shapes"], *entries]
    lists = {m: {k: list(v) for k, v in per.items()} for m, per in old.raw["metric_shapes"].items()}
    for metric, kernel, label in metrics:
        if label not in lists[metric].setdefault(kernel, []):
            lists[metric][kernel].append(label)
    data["metric_shapes"] = lists
    new = parse(data, str(path), check)
    replace_file(path, dumps(data))
    return new


def replace_file(path: Path, text: str) -> None:
    """Write *text* to *path* in one rename: a reader sees the old file or the new one."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


LISTING_COLUMNS = ("kernel", "label", "runs_on", "layout", "source", "metrics")


def listing(suite: SuiteShapes) -> list[tuple[str, ...]]:
    """One row per shape (LISTING_COLUMNS), in data-file order per kernel and list."""
    rows = []
    for kernel in KERNEL_FIELDS:
        for runs_on in RUNS_ON:
            for s in suite.shapes[(kernel, runs_on)]:
                if runs_on == "gpu":
                    metrics = ",".join(EVERY_SHAPE_METRICS + suite.metrics_of(kernel, s))
                else:  # the interpreter's suite times every metric at each of its shapes
                    metrics = ",".join(EVERY_SHAPE_METRICS + OPT_IN_METRICS)
                layout = getattr(s, "layout", "-")
                rows.append((kernel, s.label, runs_on, layout, s.source, metrics))
    return rows


_SUITE = load()

# Every kernel's shapes, {(kernel, runs_on): shapes}, in data-file order: what the suite,
# ltx2k.workload.cases and the CLI iterate over.
SHAPES: dict[tuple[str, str], tuple] = _SUITE.shapes
# The same lists by their older names, one per kernel from before the others.
ROPE_SHAPES: tuple[RopeShape, ...] = SHAPES[("split_rope", "gpu")]
ADA_SHAPES: tuple[AdaShape, ...] = SHAPES[("ada_values9", "gpu")]
ROPE_SHAPES_CPU: tuple[RopeShape, ...] = SHAPES[("split_rope", "cpu-interpreter")]
ADA_SHAPES_CPU: tuple[AdaShape, ...] = SHAPES[("ada_values9", "cpu-interpreter")]
# The calibrated host-latency metric times the default variant (ltx2k.workload.variants) here.
HOST_BOUND_SHAPES: dict[str, tuple] = _SUITE.metric_shapes["host_calibrated"]
# Shapes timed for kernel duration (CUPTI).
KERNEL_TIME_SHAPES: dict[str, tuple] = _SUITE.metric_shapes["kernel"]
# Every opt-in metric's shapes on GPUs: {metric: {kernel: shapes}}, every kernel present.
METRIC_SHAPES: dict[str, dict[str, tuple]] = _SUITE.metric_shapes


def shapes_of(kernel: str, on_gpu: bool) -> tuple:
    """*kernel*'s shapes of a GPU's list or of the CPU interpreter's."""
    return SHAPES[(kernel, "gpu" if on_gpu else "cpu-interpreter")]
