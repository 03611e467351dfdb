"""Read a protocol config: PyYAML's safe loader, a key given twice refused.

The config is parsed by PyYAML's safe loader (its libyaml implementation when
PyYAML was built with it), so values are those ``yaml.safe_load`` gives, YAML
1.1 scalars included (``yes`` is ``True``, ``0.10`` is ``0.1``, an unquoted
timestamp is a ``datetime``). What the values must be is checked afterwards,
key by key (:mod:`deermem.eval.protocol._checks`).

One check needs the document before it is turned into dictionaries: a key
given twice in one mapping. The safe loader keeps the last value without a
word, so an edited config could pin one thing and run another; here it is an
error that names the dotted key and both lines.
"""

from __future__ import annotations

from typing import Final

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

try:
    from yaml import CSafeLoader as _Loader
except ImportError:  # PyYAML built without libyaml: the same rules in Python
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

__all__ = ["RepeatedKeyError", "YAMLSyntaxError", "load_yaml"]

_MERGE_TAG: Final = "tag:yaml.org,2002:merge"


class YAMLSyntaxError(ValueError):
    """The text is not valid YAML; the message says where (line and column)."""


class RepeatedKeyError(ValueError):
    """A mapping gives the same key twice.

    Attributes:
        key: the dotted key (``"pool.capacities"``).
        first_line: the line of the first occurrence (1-based).
        second_line: the line of the repetition.
    """

    def __init__(self, key: str, first_line: int, second_line: int) -> None:
        self.key = key
        self.first_line = first_line
        self.second_line = second_line
        super().__init__(
            f"is given twice (lines {first_line} and {second_line}); a key may appear once"
        )


def load_yaml(text: str) -> object:
    """Parse one YAML document with PyYAML's safe loader, refusing repeated keys.

    Raises:
        YAMLSyntaxError: the text is not a single valid YAML document.
        RepeatedKeyError: a mapping holds a key twice.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:  # an empty document
            return None
        _check_unique_keys(loader, node, "", set())
        return loader.construct_document(node)
    except yaml.YAMLError as error:
        raise YAMLSyntaxError(" ".join(str(error).split())) from None
    finally:
        loader.dispose()


def _check_unique_keys(loader: _Loader, node: Node, path: str, seen: set[int]) -> None:
    """Walk the composed document; raise on the first mapping with a repeated scalar key.

    ``seen`` holds the nodes already walked: an alias refers to its anchor's
    node, which may contain the alias itself.
    """
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, MappingNode):
        keys: dict[object, ScalarNode] = {}
        for key_node, value_node in node.value:
            child = path
            if isinstance(key_node, ScalarNode) and key_node.tag != _MERGE_TAG:
                key = loader.construct_object(key_node)
                child = f"{path}.{key}" if path else str(key)
                first = keys.setdefault(key, key_node)
                if first is not key_node:
                    raise RepeatedKeyError(
                        child, first.start_mark.line + 1, key_node.start_mark.line + 1
                    )
            _check_unique_keys(loader, value_node, child, seen)
    elif isinstance(node, SequenceNode):
        for index, item in enumerate(node.value):
            _check_unique_keys(loader, item, f"{path}[{index}]", seen)
