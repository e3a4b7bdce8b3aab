"""A fitted tree ensemble as plain arrays (pure numpy): predicts without scikit-learn and is
stored as JSON with the rest of a model's state (``forecaster.persist``).

``Trees.from_sklearn`` reads a fitted ``HistGradientBoostingRegressor`` (one tree per boosting
iteration, numeric features): its baseline and, per node, the split feature and threshold
(``x <= threshold`` goes left, NaN goes where the tree sends missing values), children and leaf
value. ``predict`` walks every tree at once, level by level; it equals the regressor's own
``predict`` up to the order of the floating-point sum (a test checks it). ``Bag`` is the mean of
several such ensembles fitted to the same features (bagging: ``forecaster.boosted``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
_FIELDS = ("feature", "threshold", "left", "right", "value", "leaf", "missing_left")


@dataclass(frozen=True, slots=True, eq=False)
class Trees:
    """Nodes of every tree in one set of arrays; children and roots are indices into them."""

    base: float
    roots: IntArray
    feature: IntArray
    threshold: FloatArray
    left: IntArray
    right: IntArray
    value: FloatArray
    leaf: BoolArray
    missing_left: BoolArray
    depth: int

    def predict(self, x: FloatArray) -> FloatArray:
        node = np.repeat(self.roots[None, :], x.shape[0], axis=0)
        rows = np.arange(x.shape[0])[:, None]
        for _ in range(self.depth):
            xv = x[rows, self.feature[node]]
            left = np.where(np.isnan(xv), self.missing_left[node], xv <= self.threshold[node])
            node = np.where(self.leaf[node], node,
                            np.where(left, self.left[node], self.right[node]))
        return np.asarray(self.base + self.value[node].sum(axis=1), dtype=np.float64)

    @classmethod
    def from_sklearn(cls, model: Any) -> Trees:
        """From a fitted single-output ``HistGradientBoostingRegressor``."""
        parts = [predictors[0].nodes for predictors in model._predictors]
        offsets = np.cumsum([0] + [p.shape[0] for p in parts[:-1]]).astype(np.int64)
        nodes = np.concatenate(parts)
        shift = np.repeat(offsets, [p.shape[0] for p in parts])
        leaf = nodes["is_leaf"].astype(bool)
        return cls(base=float(np.ravel(model._baseline_prediction)[0]), roots=offsets,
                   feature=nodes["feature_idx"].astype(np.int64),
                   threshold=nodes["num_threshold"].astype(np.float64),
                   left=np.where(leaf, 0, nodes["left"].astype(np.int64) + shift),
                   right=np.where(leaf, 0, nodes["right"].astype(np.int64) + shift),
                   value=np.where(leaf, nodes["value"].astype(np.float64), 0.0), leaf=leaf,
                   missing_left=nodes["missing_go_to_left"].astype(bool),
                   depth=int(nodes["depth"].max()) if nodes.size else 0)

    def to_json(self) -> dict[str, Any]:
        return {"base": self.base, "roots": self.roots.tolist(), "depth": self.depth,
                **{name: getattr(self, name).tolist() for name in _FIELDS}}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Trees:
        return cls(base=float(doc["base"]), roots=np.asarray(doc["roots"], dtype=np.int64),
                   feature=np.asarray(doc["feature"], dtype=np.int64),
                   threshold=np.asarray(doc["threshold"], dtype=np.float64),
                   left=np.asarray(doc["left"], dtype=np.int64),
                   right=np.asarray(doc["right"], dtype=np.int64),
                   value=np.asarray(doc["value"], dtype=np.float64),
                   leaf=np.asarray(doc["leaf"], dtype=bool),
                   missing_left=np.asarray(doc["missing_left"], dtype=bool),
                   depth=int(doc["depth"]))


@dataclass(frozen=True, slots=True, eq=False)
class Bag:
    """Tree ensembles fitted to the same features (different seeds); predicts their mean."""

    members: tuple[Trees, ...]

    def predict(self, x: FloatArray) -> FloatArray:
        total = self.members[0].predict(x)
        for member in self.members[1:]:
            total = total + member.predict(x)
        return np.asarray(total / len(self.members), dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {"members": [m.to_json() for m in self.members]}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Bag:
        """Also reads one ``Trees`` document (state stored before bagging) as a bag of one."""
        if "members" not in doc:
            return cls((Trees.from_json(doc),))
        return cls(tuple(Trees.from_json(m) for m in doc["members"]))
