"""Pruning the forecast job's state dir, at the end of each run.

    scandir(state dir) -> StateFile(name, mtime)   [shell]
      -> prunable(files, now_s, shard, models, retention_s)   [pure: by name and age]
      -> confirmed(name, doc, shard, models) per state file (its doc names its model)   [pure]
      -> unlink   [shell]

Removed are only files Headroom wrote, matched by their exact names (``forecaster.persist``):

- temp files ``.<state file>.<8 random>.tmp`` (``save_state``'s mkstemp) older than an hour:
  left by a killed run (a write takes milliseconds);
- state files ``<name>.<crc32 hex>.<method>.json`` older than ``retention_s`` (0: keep them all)
  whose model is not in this run's model list: a model gone from the fleet.

Both only when this shard owns the model: ``Shard.owns`` hashes the model name with the same
crc32 as the file name, and a state file's doc must name a model whose file name is exactly
this one. Anything else (another shard's files, other names, links, directories) is never
touched. Ages are measured against the state dir's own clock (the mtime of a file created there
now), so a demo's virtual time, ``--at`` or a CSV's time, and a network file system's clock skew
do not matter. A run whose source lists no model at all (an outage reads the same) removes no
state file.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecaster.persist import load_state, state_stem
from forecaster.registry import METHODS

if TYPE_CHECKING:
    from controlplane.forecast_job import Shard

log = logging.getLogger("headroom.forecast_job")

#: a temp file this old is a killed run's, never one being written
TEMP_MAX_AGE_S = 3600.0

STATE_NAME = re.compile(r"(?P<stem>[A-Za-z0-9._-]{0,100}\.(?P<crc>[0-9a-f]{8}))\."
                        r"(?:" + "|".join(re.escape(m) for m in METHODS) + r")\.json")
#: mkstemp's names: prefix, 8 of [a-z0-9_], suffix
TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp")


@dataclass(frozen=True, slots=True)
class StateFile:
    name: str
    modified_s: float  # mtime, seconds since the epoch


def prunable(files: Iterable[StateFile], now_s: float, shard: Shard, models: Sequence[str],
             retention_s: float) -> tuple[list[str], list[str]]:
    """(temp files to remove, state files to remove once ``confirmed``), by name and age."""
    kept = {state_stem(m) for m in models}
    temps: list[str] = []
    stale: list[str] = []
    for f in files:
        age_s = now_s - f.modified_s
        temp = TEMP_NAME.fullmatch(f.name)
        target = STATE_NAME.fullmatch(temp["target"]) if temp else None
        if target is not None:
            if age_s > TEMP_MAX_AGE_S and shard.owns_crc(int(target["crc"], 16)):
                temps.append(f.name)
            continue
        state = STATE_NAME.fullmatch(f.name)
        if (state is not None and retention_s > 0 and age_s > retention_s
                and shard.owns_crc(int(state["crc"], 16)) and state["stem"] not in kept):
            stale.append(f.name)
    return sorted(temps), sorted(stale)


def confirmed(name: str, doc: dict[str, Any], shard: Shard, models: Sequence[str]) -> bool:
    """The state file ``name`` holds ``doc``, written for a model this shard owns and that is
    not in ``models``: the doc's series id gives exactly this file name."""
    series_id = doc.get("series_id")
    state = STATE_NAME.fullmatch(name)
    return (isinstance(series_id, str) and state is not None
            and state_stem(series_id) == state["stem"] and shard.owns(series_id)
            and series_id not in models)


def prune_state_dir(state_dir: Path, shard: Shard, models: Sequence[str],
                    retention_s: float) -> int:
    """Remove this shard's dead temp files and the state files of its models gone for longer
    than ``retention_s``; how many files were removed. A file that cannot be read or removed
    stays (logged); pruning never fails the run."""
    try:
        now_s = _now_s(state_dir)
        entries = list(os.scandir(state_dir))
    except (FileNotFoundError, NotADirectoryError):  # no state dir: nothing saved, nothing to prune
        return 0
    except OSError as exc:
        log.warning("cannot prune forecaster state dir %s: %s", state_dir,
                    exc.strerror or exc)
        return 0
    files = []
    for entry in entries:
        try:
            if entry.is_file(follow_symlinks=False):
                files.append(StateFile(entry.name, entry.stat(follow_symlinks=False).st_mtime))
        except OSError:  # removed meanwhile (renamed by a writer, or another run's pruning)
            continue
    temps, stale = prunable(files, now_s, shard, models, retention_s)
    gone = [n for n in stale if confirmed(n, load_state(state_dir / n), shard, models)]
    return sum(_remove(state_dir / name) for name in temps + gone)


def _now_s(state_dir: Path) -> float:
    """The state dir's clock: the mtime of a file created there now."""
    with tempfile.TemporaryFile(dir=state_dir) as probe:
        return os.fstat(probe.fileno()).st_mtime


def _remove(path: Path) -> bool:
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("cannot remove forecaster state file %s: %s", path, exc.strerror or exc)
        return False
    return True
