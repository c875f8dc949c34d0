"""The one YAML loader regulator reads with: `yaml.safe_load`, but strict.

Strict means two things safe_load does not do. A key repeated in one mapping is an error, never
"the last one wins" (`resolved: true` then `resolved: false` would otherwise read as false, and a
reviewer reading the first line sees true). And an implicit timestamp that is no real date
(`date: 2026-02-30`, unquoted) is an error naming its line, not a bare ValueError escaping as a
traceback. Every failure is a `YamlError`, a ValueError whose message names the line.

Tags, anchors and everything else are exactly safe_load's: no code runs, no object is built.
"""

from __future__ import annotations

from datetime import date

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode

try:  # the C parser reads the same safe subset, faster; the constructor stays Python's
    from yaml import CSafeLoader as _Base
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Base

_MERGE = "tag:yaml.org,2002:merge"
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


_StrictLoader.add_constructor(_TIMESTAMP, _StrictLoader.construct_yaml_timestamp)


def safe_load_strict(text: str) -> object:
    """What `yaml.safe_load(text)` answers, or YamlError: bad YAML, a duplicate key, a date that
    is not a date, or anything else the constructor refuses (an explicit `!!int x`, say)."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader: no tags, no code)
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


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""
