"""What is said of a demand hint as it is added: one function for ``headroom hint add`` and the
DemandHints service's AddHint, so a terminal and a gateway are told the same.

Both count the capacity on the per-replica rate the loop sizes with: the profile the newest tick
recorded (``Store.last_profiles``, the correction each tick starts from) when the settings
correct profiles, else the offline one (``hint_capacity.sizing_profile``). Before, each read the
models table's offline profile, and a model the loop had corrected to 0.6x was said to hold
what the loop would never size it for. Both also say when the model is paused: the pause holds
its replicas whatever the hint asks, until ``headroom models resume``."""

from __future__ import annotations

from collections.abc import Callable

from controlplane.autoscaling.hint_capacity import HintCheck, KnownCapacity
from controlplane.autoscaling.live import replica_shape
from controlplane.domain.hints import DemandHint
from controlplane.store import Store
from controlplane.store.pauses import SqlModelPauses


def hint_checker(store: Store, known: KnownCapacity | None
                 ) -> Callable[[DemandHint], HintCheck]:
    """A hint against ``known`` capacity (None: no pools known, nothing counted), its model's
    offline profile, the last tick's correction of it and its pause read from the store per
    call (a model no longer listed: nothing to say)."""
    def check(hint: DemandHint) -> HintCheck:
        spec = next((s for s in store.model_specs() if s.name == hint.model), None)
        if spec is None:
            return HintCheck()
        pause = next((p for p in SqlModelPauses(store.engine).paused_models()
                      if p.model == hint.model), None)
        if known is None:
            return HintCheck(None, pause)
        recorded = (next((p for p in store.last_profiles() if p.model == hint.model), None)
                    if known.corrects_profiles else None)
        return HintCheck(known.check(hint.model, hint.rate_rps, replica_shape(spec, known.pools),
                                     recorded), pause)
    return check
