"""A pickle reader for data dumps: builds only what a PyTorch Flight Recorder dump contains.

:mod:`pickle` runs whatever a pickle names, and even a restricted ``find_class`` leaves the opcodes
free: ``bytearray(12 << 30)`` from 71 bytes, a list nested a million deep, a memo reference
doubling at each level (2**40 elements when walked). This module never calls :mod:`pickle`'s
loader. It walks the opcodes (:func:`pickletools.genops`, which reads each argument from the
bytes given — a length larger than what is left is an error, never an allocation) and builds the
values itself, allowing:

- ``None``, booleans, integers (at most 64 bytes long), floats, strings, bytes (bounded by the data);
- lists, tuples, dicts, sets and frozensets, with memo references (at most :data:`MAX_SHARED_HASH`
  keys of one dict or set sharing a hash value: colliding keys would cost quadratic time);
- the globals PyTorch's C++ pickler writes for typed lists (``torch.jit._pickle.build_intlist`` and
  friends, ``restore_type_tag``), which return their argument, and ``builtins.set``/``frozenset``
  (Python's protocol 2 form of a set) — each only as the callee of ``REDUCE``.

Everything else (any other global, ``BUILD``, ``NEWOBJ``, persistent ids, extensions, out-of-band
buffers, ``bytearray``) is refused. The result is then checked without recursion: nesting at most
``depth`` levels (the ``depth`` budget of :mod:`clusterdoctor.observe.limits`), no cycles, and at
most :data:`MAX_SHARING` times as many values reached as the pickle built (shared references cannot
multiply it). Real dumps (``tests/data/comm/fr_gloo_2rank``, torch 2.13) are protocol 2 with no global.
"""

from __future__ import annotations

import pickletools
from typing import Any

__all__ = ["MAX_INT_BYTES", "MAX_SHARED_HASH", "MAX_SHARING", "TooDeep", "UnsafePickle", "loads"]

MAX_INT_BYTES = 64  # a dump's integers are int64 (ids, nanosecond times); 64 bytes is 512 bits
MAX_SHARING = 4  # values reached by walking the result, per value the pickle built
# CPython's dicts and sets find a key by scanning the keys that share its hash: n distinct keys with
# one hash (integers i * (2**61 - 1) all hash to 0) make building the dict n**2/2 comparisons (issue
# 25: 560 KB, 32 s). A real dump's keys are names and small ids with distinct hashes.
MAX_SHARED_HASH = 64

_IDENTITY_GLOBALS = frozenset(
    {
        ("torch.jit._pickle", "build_intlist"),
        ("torch.jit._pickle", "build_doublelist"),
        ("torch.jit._pickle", "build_boollist"),
        ("torch.jit._pickle", "build_tensorlist"),
        ("torch.jit._pickle", "restore_type_tag"),
    }
)
_SET_GLOBALS = {("builtins", "set"): set, ("__builtin__", "set"): set,
                ("builtins", "frozenset"): frozenset, ("__builtin__", "frozenset"): frozenset}  # fmt: skip


class UnsafePickle(ValueError):
    """The pickle asks for something a data dump never holds, or is malformed/too large."""


class TooDeep(UnsafePickle):
    """Values nested deeper than the depth limit."""


class _Global:
    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module, self.name = module, name


_LEAF_OPS = {
    "NONE", "NEWTRUE", "NEWFALSE", "INT", "BININT", "BININT1", "BININT2", "LONG", "LONG1", "LONG4",
    "FLOAT", "BINFLOAT", "STRING", "BINSTRING", "SHORT_BINSTRING", "UNICODE", "BINUNICODE",
    "SHORT_BINUNICODE", "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES", "BINBYTES8",
}  # fmt: skip


def loads(data: bytes, max_depth: int = 100) -> Any:
    """The value of ``data``; :class:`UnsafePickle` (a ``ValueError``) for anything not allowed."""
    stack: list[Any] = []
    marks: list[int] = []
    memo: dict[int, Any] = {}
    built = 0
    # depth of each container built so far, by id (the containers are kept alive in `alive`, so an id
    # is never reused): refuses a deep pickle as it is built, before a million levels exist
    depth_of: dict[int, int] = {}
    alive: list[Any] = []
    hashes: dict[int, dict[int, int]] = {}  # per dict/set (by id; kept alive): keys per hash value

    def add_key(container: Any, k: Any, counts: dict[int, int] | None = None) -> None:
        """Count ``k`` (not yet in ``container``) against the keys sharing its hash."""
        if k in container:  # bounded: never more than MAX_SHARED_HASH keys share a hash here
            return
        c = hashes.setdefault(id(container), {}) if counts is None else counts
        h = hash(k)
        n = c.get(h, 0) + 1
        if n > MAX_SHARED_HASH:
            raise UnsafePickle(
                f"more than {MAX_SHARED_HASH} keys of one dict or set share a hash value (colliding "
                "keys: building it would take quadratic time)"
            )
        c[h] = n

    def guarded_set(kind: type, items: list[Any]) -> Any:
        out: set[Any] = set()
        counts: dict[int, int] = {}
        for x in items:
            add_key(out, x, counts)
            out.add(x)
        return out if kind is set else kind(out)

    def nest(container: Any, items: Any) -> None:
        d = depth_of.get(id(container), 1)
        for x in items:
            d = max(d, depth_of.get(id(x), 0) + 1)
        if d > max_depth:
            raise TooDeep(f"values nested deeper than {max_depth} levels")
        if d > 1 or id(container) not in depth_of:
            depth_of[id(container)] = d
            alive.append(container)

    def pop_mark() -> list[Any]:
        if not marks:
            raise UnsafePickle("unbalanced MARK")
        k = marks.pop()
        items = stack[k:]
        del stack[k:]
        return items

    def top(kind: type | tuple[type, ...], op: str) -> Any:
        if not stack or not isinstance(stack[-1], kind):
            raise UnsafePickle(f"{op} on a value of the wrong type")
        return stack[-1]

    def value(x: Any, op: str) -> Any:
        if isinstance(x, _Global):
            raise UnsafePickle(f"{op}: not a value")
        return x

    try:
        ops = pickletools.genops(data)
        for opcode, arg, _pos in ops:
            name = opcode.name
            built += 1
            if name in _LEAF_OPS:
                if name in ("NEWTRUE", "NEWFALSE", "NONE"):
                    arg = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}[name]
                elif name in ("LONG1", "LONG4", "LONG", "INT") and isinstance(arg, int):
                    if arg.bit_length() > 8 * MAX_INT_BYTES:
                        raise UnsafePickle(f"integer longer than {MAX_INT_BYTES} bytes")
                stack.append(arg)
            elif name in ("PROTO", "FRAME"):
                continue
            elif name == "STOP":
                if len(stack) != 1 or marks:
                    raise UnsafePickle("the pickle does not end with one value")
                result = value(stack.pop(), name)
                break
            elif name == "MARK":
                marks.append(len(stack))  # the mark is an index: the stack holds only values
            elif name == "POP":
                if not stack:
                    raise UnsafePickle("POP on an empty stack")
                stack.pop()
            elif name == "POP_MARK":
                pop_mark()
            elif name == "DUP":
                if not stack:
                    raise UnsafePickle("DUP on an empty stack")
                stack.append(stack[-1])
            elif name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
                if not stack:
                    raise UnsafePickle("memo store of an empty stack")
                memo[len(memo) if name == "MEMOIZE" else int(arg)] = stack[-1]
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                if int(arg) not in memo:
                    raise UnsafePickle(f"memo reference {arg} was never stored")
                stack.append(memo[int(arg)])
            elif name == "EMPTY_LIST":
                stack.append([])
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "EMPTY_DICT":
                stack.append({})
            elif name == "EMPTY_SET":
                stack.append(set())
            elif name == "LIST":
                items = [value(x, name) for x in pop_mark()]
                nest(items, items)
                stack.append(items)
            elif name == "TUPLE":
                t = tuple(value(x, name) for x in pop_mark())
                nest(t, t)
                stack.append(t)
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                n = int(name[-1])
                if len(stack) - (marks[-1] if marks else 0) < n:
                    raise UnsafePickle(f"{name} on a short stack")
                items = tuple(value(x, name) for x in stack[-n:])
                del stack[-n:]
                nest(items, items)
                stack.append(items)
            elif name == "DICT":
                items = pop_mark()
                d = {}
                nest(d, items)
                _pairs(d, items, name, add_key)
                stack.append(d)
            elif name == "FROZENSET":
                items = [value(x, name) for x in pop_mark()]
                fs = guarded_set(frozenset, items)
                nest(fs, items)
                stack.append(fs)
            elif name == "APPEND":
                if len(stack) < 2:
                    raise UnsafePickle("APPEND on a short stack")
                item = value(stack.pop(), name)
                lst = top(list, name)
                nest(lst, (item,))
                lst.append(item)
            elif name == "APPENDS":
                items = [value(x, name) for x in pop_mark()]
                lst = top(list, name)
                nest(lst, items)
                lst.extend(items)
            elif name == "SETITEM":
                if len(stack) < 3:
                    raise UnsafePickle("SETITEM on a short stack")
                v, k = value(stack.pop(), name), value(stack.pop(), name)
                d = top(dict, name)
                nest(d, (k, v))
                add_key(d, k)
                d[k] = v
            elif name == "SETITEMS":
                items = pop_mark()
                d = top(dict, name)
                nest(d, items)
                _pairs(d, items, name, add_key)
            elif name == "ADDITEMS":
                items = [value(x, name) for x in pop_mark()]
                st = top(set, name)
                nest(st, items)
                for x in items:
                    add_key(st, x)
                    st.add(x)
            elif name in ("GLOBAL", "STACK_GLOBAL"):
                if name == "GLOBAL":
                    module, _, attr = str(arg).partition(" ")
                else:
                    if len(stack) < 2 or not all(isinstance(x, str) for x in stack[-2:]):
                        raise UnsafePickle("STACK_GLOBAL without two names")
                    module, attr = stack[-2], stack[-1]
                    del stack[-2:]
                if (module, attr) not in _IDENTITY_GLOBALS and (module, attr) not in _SET_GLOBALS:
                    raise UnsafePickle(f"refusing to load {module}.{attr} (a dump holds only plain values)")
                stack.append(_Global(module, attr))
            elif name == "REDUCE":
                if len(stack) < 2 or not isinstance(stack[-2], _Global) or not isinstance(stack[-1], tuple):
                    raise UnsafePickle("REDUCE of something that is not an allowed global")
                fn, args = stack[-2], stack[-1]
                del stack[-2:]
                if not args:
                    raise UnsafePickle(f"{fn.module}.{fn.name} without arguments")
                if (fn.module, fn.name) in _SET_GLOBALS:
                    if len(args) != 1 or not isinstance(args[0], (list, tuple, set, frozenset)):
                        raise UnsafePickle(f"{fn.name}() of something that is not a list")
                    stack.append(guarded_set(_SET_GLOBALS[(fn.module, fn.name)], list(args[0])))
                else:
                    stack.append(args[0])  # torch.jit._pickle.build_*: the list itself
            else:
                raise UnsafePickle(f"opcode {name} is not allowed in a data dump")
        else:
            raise UnsafePickle("the pickle ends without STOP")
    except UnsafePickle:
        raise
    except (ValueError, TypeError, KeyError, IndexError, OverflowError, UnicodeDecodeError, EOFError) as e:
        # genops' own errors (a length past the end of the data, a bad opcode), unhashable dict keys
        raise UnsafePickle(f"malformed pickle: {str(e)[:200]}") from None
    _check_shape(result, max_depth, MAX_SHARING * built + 1000)
    return result


def _pairs(d: dict[Any, Any], items: list[Any], op: str, add_key: Any) -> dict[Any, Any]:
    if len(items) % 2:
        raise UnsafePickle(f"{op} with an odd number of items")
    for i in range(0, len(items), 2):
        k, v = items[i], items[i + 1]
        if isinstance(k, _Global) or isinstance(v, _Global):
            raise UnsafePickle(f"{op}: not a value")
        add_key(d, k)
        d[k] = v
    return d


def _check_shape(obj: Any, max_depth: int, max_visits: int) -> None:
    """Depth, cycles and sharing of a built value, without recursion."""
    visits = 0
    on_path: set[int] = set()
    # (value, depth, entering?) — containers are left once their children are done
    todo: list[tuple[Any, int, bool]] = [(obj, 1, True)]
    while todo:
        x, depth, entering = todo.pop()
        if not entering:
            on_path.discard(id(x))
            continue
        visits += 1
        if visits > max_visits:
            raise UnsafePickle(f"shared references reach more than {max_visits:,} values (a reference bomb)")
        if isinstance(x, (list, tuple, dict, set, frozenset)):
            if depth > max_depth:
                raise TooDeep(f"values nested deeper than {max_depth} levels")
            if id(x) in on_path:
                raise UnsafePickle("a container holds itself (recursive structure)")
            on_path.add(id(x))
            todo.append((x, depth, False))
            children = [*x.keys(), *x.values()] if isinstance(x, dict) else x
            for c in children:
                todo.append((c, depth + 1, True))
