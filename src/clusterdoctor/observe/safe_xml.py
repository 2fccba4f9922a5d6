"""Parse untrusted XML into an ElementTree without entity tricks.

Topology dumps come from other machines. ``xml.etree`` would expand entities declared in an internal
DTD subset ("billion laughs"); this reader refuses any entity declaration, parses with expat directly
and never fetches external DTDs (hwloc's ``<!DOCTYPE topology SYSTEM "hwloc2.dtd">`` is accepted and
ignored). Every failure is an :class:`~clusterdoctor.errors.InputError` naming the line.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from xml.parsers import expat

from clusterdoctor.errors import InputError

MAX_DEPTH = 256  # hwloc trees are < 20 levels deep; deeper is garbage (and would blow recursion)


class _Refused(Exception):
    """Raised inside expat callbacks; turned into InputError by :func:`parse_xml`."""


def parse_xml(data: bytes | str, path: str | None = None) -> ET.Element:
    """Parse ``data`` into an Element tree; entity declarations and malformed XML raise InputError."""
    if isinstance(data, str):
        data = data.encode("utf-8", errors="surrogatepass")
        encoding: str | None = "utf-8"
    else:
        encoding = None
    builder = ET.TreeBuilder()
    depth = 0
    try:
        parser = expat.ParserCreate(encoding)
    except (ValueError, LookupError) as e:  # pragma: no cover - expat always knows utf-8
        raise InputError(f"cannot parse XML: {e}", path) from None

    def refuse_entity(*_args: object) -> None:
        raise _Refused("XML entity declarations are not accepted in topology files")

    def doctype(_name: str, _sysid: str | None, _pubid: str | None, has_internal_subset: int) -> None:
        if has_internal_subset:
            raise _Refused("XML DOCTYPE with an internal subset is not accepted in topology files")

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        if depth > MAX_DEPTH:
            raise _Refused(f"XML nested deeper than {MAX_DEPTH} levels")
        builder.start(tag, attrs)

    def end(tag: str) -> None:
        nonlocal depth
        depth -= 1
        builder.end(tag)

    parser.EntityDeclHandler = refuse_entity
    parser.UnparsedEntityDeclHandler = refuse_entity
    parser.StartDoctypeDeclHandler = doctype
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = builder.data
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.buffer_text = True
    try:
        parser.Parse(data, True)
    except _Refused as e:
        raise InputError(str(e), path, parser.CurrentLineNumber) from None
    except expat.ExpatError as e:
        raise InputError(f"malformed XML: {expat.ErrorString(e.code)}", path, e.lineno) from None
    except (ValueError, UnicodeError, LookupError) as e:
        raise InputError(f"cannot parse XML: {e}", path, parser.CurrentLineNumber) from None
    try:
        return builder.close()
    except (AssertionError, IndexError):  # no root element was seen
        raise InputError("empty XML document (no root element)", path) from None


def xml_head_root(head: bytes) -> str | None:
    """The name of the first element in ``head`` (a file's first bytes), skipping prolog and comments."""
    text = head.decode("utf-8", errors="replace")
    i = 0
    n = len(text)
    while i < n:
        j = text.find("<", i)
        if j < 0 or j + 1 >= n:
            return None
        nxt = text[j + 1]
        if nxt == "?":
            k = text.find("?>", j)
        elif text.startswith("<!--", j):
            k = text.find("-->", j)
        elif nxt == "!":
            k = text.find(">", j)
        else:
            end = j + 1
            while end < n and (text[end].isalnum() or text[end] in "_-.:"):
                end += 1
            return text[j + 1 : end] or None
        if k < 0:
            return None
        i = k + 2
    return None
