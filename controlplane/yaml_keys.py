"""YAML read by Headroom (settings, models files): a key given twice is an error, and so is
nesting deeper than ``MAX_NESTING`` (PyYAML composes nodes recursively: about 500 levels ended
in a RecursionError, a traceback instead of a line naming the file)."""

from __future__ import annotations

from typing import Any

import yaml

#: lists and mappings inside one another, at most (Headroom's files need fewer than 10)
MAX_NESTING = 100


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader refusing a key given twice in one mapping (PyYAML keeps the last one, so
    ``interval_s: 10`` further up would be dropped without a word). A key a merge (``<<: *x``)
    brings in may be given again: that is what merging is for. Refuses nesting deeper than
    ``MAX_NESTING``, naming the line."""

    _nesting = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self._nesting >= MAX_NESTING and parent is not None:  # at the parent's line
            raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_NESTING} "
                                              "levels", parent.start_mark)
        self._nesting += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._nesting -= 1

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)
