"""Plain data classes for the prolog's hot path, without `import dataclasses`.

The stdlib module costs ~9 ms to import (it pulls in inspect, ast and dis) and
about 0.8 ms per class it builds (it compiles code for every method it adds);
the prolog builds about ten such classes before every job. `dataclass` here
gives the subset slurmqual uses, behaving like the stdlib one
(tests/test_records.py compares them):

- fields are the class annotations in order; a default is a class attribute,
  `field(default_factory=...)` makes a fresh value per instance;
- `__init__` takes fields positionally or by keyword, `__repr__` and `__eq__`
  compare/print the fields, `__match_args__` lists them;
- `frozen=True`: assigning or deleting an attribute raises
  FrozenInstanceError (an AttributeError) and instances hash by their fields;
  otherwise instances are unhashable, as with eq=True in the stdlib.

Anything else (order, slots, kw_only, __post_init__, ClassVar, inheriting
fields, a class defining its own __eq__/__hash__) is refused with TypeError,
so nobody gets stdlib semantics silently missing. dataclasses.fields(),
asdict() and replace() do not know these classes.
"""

from __future__ import annotations

_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Assignment to a field of a frozen instance (like dataclasses.FrozenInstanceError)."""


class _Factory:
    __slots__ = ("make",)

    def __init__(self, make):
        self.make = make


def field(*, default_factory):
    """A field whose default is `default_factory()`, called per instance."""
    return _Factory(default_factory)


def dataclass(cls=None, /, *, frozen: bool = False):
    """@dataclass or @dataclass(frozen=True): see the module docstring."""
    if cls is None:
        return lambda c: _build(c, frozen)
    return _build(cls, frozen)


def _fields(cls) -> list[tuple[str, object]]:
    """(name, default or _Factory or _MISSING) per annotated field, in order."""
    for base in cls.__mro__[1:]:
        if "__record_fields__" in base.__dict__:
            raise TypeError(f"{cls.__name__}: inheriting record fields is not supported")
    for name in ("__eq__", "__hash__", "__post_init__", "__slots__"):
        if name in cls.__dict__:
            raise TypeError(f"{cls.__name__}: defines {name}, which slurmqual.records does not support")
    out: list[tuple[str, object]] = []
    for name, annotation in cls.__dict__.get("__annotations__", {}).items():
        if "ClassVar" in str(annotation) or "InitVar" in str(annotation):
            raise TypeError(f"{cls.__name__}.{name}: ClassVar/InitVar fields are not supported")
        default = cls.__dict__.get(name, _MISSING)
        if isinstance(default, _Factory):
            delattr(cls, name)  # like the stdlib: no class attribute for a factory field
        elif default is not _MISSING and default.__class__.__hash__ is None:
            raise ValueError(f"mutable default {type(default)} for field {name} is not allowed: use default_factory")
        if default is _MISSING and out and out[-1][1] is not _MISSING:
            raise TypeError(f"non-default argument {name!r} follows default argument")
        out.append((name, default))
    return out


def _names(missing: list[str]) -> str:
    """'a', 'a' and 'b', 'a', 'b', and 'c': as Python words a missing-arguments error."""
    quoted = [repr(m) for m in missing]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def _build(cls, frozen: bool):
    fields = _fields(cls)
    names = tuple(n for n, _ in fields)
    index = set(names)
    qualname = cls.__qualname__
    required = sum(1 for _, d in fields if d is _MISSING)
    takes = (f"from {required + 1} to {len(names) + 1} positional arguments" if required < len(names)
             else f"{len(names) + 1} positional argument{'s' if names else ''}")
    setter = object.__setattr__

    def __init__(self, *args, **kwargs):
        if len(args) > len(names):
            raise TypeError(f"{qualname}.__init__() takes {takes} but {len(args) + 1} were given")
        for key in kwargs:
            if key not in index:
                raise TypeError(f"{qualname}.__init__() got an unexpected keyword argument {key!r}")
        missing = []
        for i, (name, default) in enumerate(fields):
            if i < len(args):
                if name in kwargs:
                    raise TypeError(f"{qualname}.__init__() got multiple values for argument {name!r}")
                value = args[i]
            elif name in kwargs:
                value = kwargs[name]
            elif default is _MISSING:
                missing.append(name)
                continue
            elif isinstance(default, _Factory):
                value = default.make()
            else:
                value = default
            setter(self, name, value)
        if missing:
            raise TypeError(f"{qualname}.__init__() missing {len(missing)} required positional argument"
                            f"{'s' if len(missing) > 1 else ''}: {_names(missing)}")

    def __repr__(self):
        return f"{self.__class__.__qualname__}(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in names) + ")"

    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)

    methods = {"__init__": __init__, "__eq__": __eq__, "__match_args__": names, "__record_fields__": names}
    if "__repr__" not in cls.__dict__:
        methods["__repr__"] = __repr__
    if frozen:
        def __setattr__(self, name, value):
            raise FrozenInstanceError(f"cannot assign to field {name!r}")

        def __delattr__(self, name):
            raise FrozenInstanceError(f"cannot delete field {name!r}")

        def __hash__(self):
            return hash(tuple(getattr(self, n) for n in names))

        methods.update(__setattr__=__setattr__, __delattr__=__delattr__, __hash__=__hash__)
    else:
        methods["__hash__"] = None
    for name, value in methods.items():
        if callable(value):
            value.__qualname__ = f"{qualname}.{name}"
        setattr(cls, name, value)
    return cls
