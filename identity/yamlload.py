"""The one YAML loader regulator reads with: `yaml.safe_load`, but strict.

Strict means two things safe_load does not do. A key repeated in one mapping is an error, never
"the last one wins" (`resolved: true` then `resolved: false` would otherwise read as false, and a
reviewer reading the first line sees true). And an implicit timestamp that is no real date
(`date: 2026-02-30`, unquoted) is an error naming its line, not a bare ValueError escaping as a
traceback. Every failure is a `YamlError`, a ValueError whose message names the line.

Tags, anchors and everything else are exactly safe_load's: no code runs, no object is built. But
aliases are bounded: an alias that refers to a node containing it (a value that contains itself) is
an error, and so are aliases that repeat more than `MAX_REPEATED` values, or `MAX_REPEATED_CHARS`
characters of text, in all (ten levels of ten aliases each are ten billion values from a kilobyte,
and twenty thousand aliases of one long text are gigabytes: every reader that walks the data, or
joins its texts, would walk them all).
"""

from __future__ import annotations

from datetime import date

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import CollectionNode, MappingNode, Node, ScalarNode

try:  # the C parser reads the same safe subset, faster; the constructor stays Python's
    from yaml import CSafeLoader as _Base
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Base

_MERGE = "tag:yaml.org,2002:merge"
MAX_REPEATED = 100_000  # values aliases may add to a document's own, in all
MAX_REPEATED_CHARS = 1 << 20  # and characters of text (a store line's limit, 1 MiB)
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


class YamlError(ValueError):
    """YAML regulator will not read; the message names the line (1-based) where it can."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.problem = message
        self.line = line
        super().__init__(self.at())

    def at(self, offset: int = 0) -> str:
        """The message with its lines counted `offset` further (YAML that starts inside a file)."""
        return f"line {self.line + offset}: {self.problem}" if self.line is not None else self.problem


class BoundError(YamlError):
    """YAML that is valid but that regulator does not read: aliases that repeat too much or refer to
    a value containing them, a number past MAX_NUMBER characters."""


class DuplicateKeyError(YamlError):
    """A key given twice in one mapping."""

    def __init__(self, key: object, line: int, first: int) -> None:
        self.key = key
        self.first = first
        super().__init__(f"duplicate key {key!r}", line)

    def at(self, offset: int = 0) -> str:
        return f"{super().at(offset)} (first given on line {self.first + offset})"


class ImpossibleDateError(YamlError):
    """An unquoted date-like value that is no real date, such as 2026-02-30."""

    line: int  # always known: the node that failed has a mark

    def __init__(self, value: str, line: int, key: object = None) -> None:
        self.value = value
        self.key = key
        where = f"{key} " if key is not None else ""
        super().__init__(f"{where}{value} is not a real date", line)


def _line(node: Node) -> int:
    return node.start_mark.line + 1


class _StrictLoader(_Base):
    def construct_mapping(self, node: Node, deep: bool = False) -> dict[object, object]:
        if isinstance(node, MappingNode):
            seen: dict[object, int] = {}
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE:
                    continue  # `<<: *base` merges on purpose; the keys written here still count
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:
                    continue  # an unhashable key: the base constructor names it
                if first is not None:
                    raise DuplicateKeyError(key, _line(key_node), first)
                seen[key] = _line(key_node)
                if isinstance(value_node, ScalarNode) and value_node.tag == _TIMESTAMP:
                    try:
                        SafeConstructor.construct_yaml_timestamp(self, value_node)
                    except ValueError:
                        raise ImpossibleDateError(value_node.value, _line(value_node), key) from None
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node: ScalarNode) -> date:
        try:
            return SafeConstructor.construct_yaml_timestamp(self, node)
        except ValueError:
            raise ImpossibleDateError(node.value, _line(node)) from None

    def construct_yaml_int(self, node: ScalarNode) -> int:
        _short_number(node)
        value = SafeConstructor.construct_yaml_int(self, node)
        if not -(2**63) <= value < 2**63:
            # no policy, contract or register needs one; and Python hashes every multiple of 2**61 - 1
            # alike, so a mapping of such keys is built in quadratic time (a third review: 2.2 s for
            # 256 KiB under serve's write lock, 78 s of lint for a 1 MiB record)
            raise BoundError("an integer past 64 bits", _line(node))
        return value

    def construct_yaml_float(self, node: ScalarNode) -> float:
        _short_number(node)
        return SafeConstructor.construct_yaml_float(self, node)


MAX_NUMBER = 64  # characters of a number: past it, a number no policy, contract or register needs


def _short_number(node: ScalarNode) -> None:
    """A number of more than MAX_NUMBER characters is an error, before it is built: PyYAML builds a
    sexagesimal `1:0:0:…` by a multiplication per part (quadratic: 1.8 s for 256 KiB), and a hex
    integer of thousands of digits is one no reader can write as text (`str` refuses past 4,300
    digits: a traceback in serve's log)."""
    if len(node.value) > MAX_NUMBER:
        raise BoundError(f"a number of {len(node.value):,} characters (at most {MAX_NUMBER})", _line(node))


_StrictLoader.add_constructor(_TIMESTAMP, _StrictLoader.construct_yaml_timestamp)
_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:float", _StrictLoader.construct_yaml_float)


def _expanded(root: Node) -> tuple[int, int, int, int]:
    """(values written, their texts' characters, the same two once every alias is followed) of a
    composed document, each node counted once per place it is reached (memoized: linear in the
    nodes written). YamlError for a node that contains itself through an alias."""
    sizes: dict[int, tuple[int, int]] = {}
    open_: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    written = chars = 0
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_.discard(key)
            own = len(node.value) if isinstance(node, ScalarNode) else 0
            written, chars = written + 1, chars + own
            values, text = 1, own
            for child in _children(node):
                more, longer = sizes[id(child)]
                values, text = values + more, text + longer
            sizes[key] = (values, text)
            continue
        if key in sizes:
            continue
        if key in open_:
            raise BoundError("an alias refers to a value that contains it", _line(node))
        open_.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in open_:
                raise BoundError("an alias refers to a value that contains it", _line(child))
            if id(child) not in sizes:
                stack.append((child, False))
    return written, chars, *sizes[id(root)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, CollectionNode):
        return list(node.value)
    return []


def safe_load_strict(text: str) -> object:
    """What `yaml.safe_load(text)` answers, or YamlError: bad YAML, a duplicate key, a date that
    is not a date, an alias that contains itself or aliases that repeat too much (`_expanded`), or
    anything else the constructor refuses (an explicit `!!int x`, say)."""
    loader = _StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        # an alias is written `*name`: a text without a `*` repeats nothing (and is not walked)
        written, chars, values, characters = _expanded(node) if "*" in text else (0, 0, 0, 0)
        if values - written > MAX_REPEATED:
            raise BoundError(
                f"aliases repeat {values - written:,} values (at most {MAX_REPEATED:,}): write the values out"
            )
        if characters - chars > MAX_REPEATED_CHARS:
            raise BoundError(
                f"aliases repeat {characters - chars:,} characters of text (at most {MAX_REPEATED_CHARS:,}): "
                "write the values out"
            )
        return loader.construct_document(node)
    except YamlError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "not valid YAML"
        raise YamlError(problem, mark.line + 1 if mark is not None else None) from None
    except yaml.YAMLError as exc:
        raise YamlError(_first_line(exc) or "not valid YAML") from None
    except (ValueError, TypeError, OverflowError) as exc:
        raise YamlError(f"a value YAML cannot build ({_first_line(exc) or type(exc).__name__})") from None
    except RecursionError:
        raise YamlError("nested too deeply") from None
    finally:
        loader.dispose()


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
