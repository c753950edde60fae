"""Deprecated: the old name of :mod:`ltx2k.workload.reference`.

Importing it gives that very module (one module object, one state) and warns once per
process; import :mod:`ltx2k.workload.reference` instead.
"""

from ltx2k import _moved

_moved(__name__)
