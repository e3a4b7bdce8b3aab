"""YAML read by Headroom (settings, simulate models files): a key given twice is an error."""

from __future__ import annotations

from typing import Any

import yaml


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader refusing a key given twice in one mapping (PyYAML keeps the last one, so
    ``interval_s: 10`` further up would be dropped without a word). A key a merge (``<<: *x``)
    brings in may be given again: that is what merging is for."""

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
