"""Which names may reach asv's pages: benchmarks, parameters, machines, environments.

asv 0.6's pages (``graphdisplay.js``, ``summarygrid.js``) build HTML by string
concatenation from these names, so a name asv itself would never produce can
carry markup into the published site. Each check follows the rule asv uses to
make the name in the first place:

* a benchmark name is the dotted Python path asv's discovery builds from
  module, class and attribute names, so every part is a Python identifier, as
  are parameter names (``param_names``, Python argument names);
* a machine or environment name becomes a file and URL name through
  :func:`asv.util.sanitize_filename`, so it must come through that unchanged;
* free text (a parameter value, a ``pretty_name``, a unit) is shown as it is,
  so it may hold no HTML-special or control character.

Each function returns why a name is refused, or None when it is fine.
"""

from __future__ import annotations

# Characters that change the meaning of HTML (element, attribute, entity, or
# the template-string quote) where asv concatenates a name into markup.
_HTML_SPECIAL = frozenset("<>&\"'`")
MAX_NAME_CHARS = 500  # far past any real name; keeps a hostile one from swamping the page


def _text(value, what: str) -> str | None:
    if not isinstance(value, str):
        return f"{what} is a JSON {type(value).__name__}, not a string"
    if len(value) > MAX_NAME_CHARS:
        return f"{what} is {len(value)} characters long (at most {MAX_NAME_CHARS})"
    bad = sorted({c for c in value if c in _HTML_SPECIAL or not c.isprintable()})
    if bad:
        return f"{what} {value[:80]!r} holds {''.join(bad)!r}, which asv's pages would read as HTML"
    return None


def text(value, what: str = "text") -> str | None:
    """Free text shown on asv's pages as it is: a parameter value, a pretty name, a unit."""
    return _text(value, what)


def benchmark(name, what: str = "benchmark name") -> str | None:
    """A benchmark name: dot-separated Python identifiers, as asv's discovery makes them."""
    why = _text(name, what)
    if why:
        return why
    if not all(part.isidentifier() for part in name.split(".")):
        return f"{what} {name!r} is not a dotted Python name (module.Class.method)"
    return None


def identifier(name, what: str = "parameter name") -> str | None:
    why = _text(name, what)
    if why is None and not name.isidentifier():
        why = f"{what} {name!r} is not a Python identifier"
    return why


def file_name(name, what: str) -> str | None:
    """A machine or environment name: unchanged by asv's sanitize_filename, and plain text."""
    from asv.util import sanitize_filename

    why = _text(name, what)
    if why:
        return why
    if not name or name in (".", "..") or sanitize_filename(name) != name:
        return f"{what} {name!r} is not a name asv can use as a file name"
    return None
