"""`loads`/`dumps` for the prolog's hot path without `import json`.

The stdlib `json` package imports `re` (and `re` imports `enum`): ~8 ms of
CPU before every job, most of the gap to the prolog's 3x target. Its C
accelerator `_json` does the actual work of `json.loads`/`json.dumps` with
their default arguments and imports nothing; this module drives it the way
`json.decoder.JSONDecoder` and `json.encoder.JSONEncoder` do, so results and
errors are the stdlib's (tests/test_leanjson.py compares them on the files
the hooks write and on hostile input). Only a failure imports `json.decoder`
(for its JSONDecodeError, a ValueError). Where `_json` is missing (another
Python implementation) these are the stdlib functions.

Used for the config cache and the node state file, which the prolog reads
and writes before every job; everything else keeps `json`.
"""

from __future__ import annotations

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None


def _error(msg: str, doc: str, pos: int) -> ValueError:
    from json.decoder import JSONDecodeError  # only on bad input: the import it spares the good path

    return JSONDecodeError(msg, doc, pos)


def _not_serializable(o: object):
    raise TypeError(f"Object of type {o.__class__.__name__} is not JSON serializable")


class _Context:
    """What `_json.make_scanner` reads from a JSONDecoder with default arguments:
    float and int themselves select its fast number path."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_WHITESPACE = " \t\n\r"

if _json is not None:
    _scan = _json.make_scanner(_Context())

    def loads(s: str):
        """json.loads(s) for a str, same result and same errors."""
        if not isinstance(s, str):
            import json

            return json.loads(s)
        if s.startswith("\ufeff"):
            raise _error("Unexpected UTF-8 BOM (decode using utf-8-sig)", s, 0)
        idx = len(s) - len(s.lstrip(_WHITESPACE))
        try:
            obj, end = _scan(s, idx)
        except StopIteration as err:
            raise _error("Expecting value", s, err.value) from None
        end = len(s) - len(s[end:].lstrip(_WHITESPACE))
        if end != len(s):
            raise _error("Extra data", s, end)
        return obj

    def dumps(obj) -> str:
        """json.dumps(obj) with default arguments, same text."""
        if isinstance(obj, str):
            return _json.encode_basestring_ascii(obj)
        # A fresh markers dict per call, as JSONEncoder.iterencode does (circular references: ValueError).
        chunks = _json.make_encoder({}, _not_serializable, _json.encode_basestring_ascii, None,
                                    ": ", ", ", False, False, True)(obj, 0)
        return "".join(chunks)
else:  # pragma: no cover
    from json import dumps, loads  # noqa: F401
