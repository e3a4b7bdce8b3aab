"""Forecaster state files: written whole, whatever else writes the same file at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from forecaster.persist import save_state


def test_two_writers_of_one_state_file_in_one_process_never_mix_or_fail(tmp_path: Path) -> None:
    # threads share a PID, as two pods of one shard can in their own PID namespaces: a temp name
    # made from the PID would be shared, and one writer's rename would take the other's file
    path = tmp_path / "state" / "m.json"
    docs = [{"writer": w, "values": [w] * (50 + 4000 * w)} for w in (0, 1)]
    errors: list[BaseException] = []

    def write(doc: dict[str, object]) -> None:
        try:
            for _ in range(150):
                save_state(path, doc)
        except BaseException as error:  # reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(doc,)) for doc in docs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert json.loads(path.read_text()) in docs
    assert sorted(p.name for p in path.parent.iterdir()) == ["m.json"]  # no temp file left
