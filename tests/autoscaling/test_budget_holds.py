"""Which models a GPU budget or pool holds below the replicas they were sized for, as a tick's
note says it (pure): the numbers the sizing knows (sized before the cut, held after), the limit
and the budget's GPUs, read back from the note for the dashboard."""

from __future__ import annotations

from controlplane.autoscaling.core import Budgets, Sizing, budget_holds
from controlplane.autoscaling.sizing import ModelRequest, ReplicaShape
from controlplane.domain.budget_hold import FOR_PAUSE, BudgetHold, holds_noted

CHAT = ReplicaShape("chat", "acme", "A100-80GB", 3 / 7, 40.0)
SUPPORT = ReplicaShape("support", "acme", "A100-80GB", 2 / 7, 18.0)
VISION = ReplicaShape("vision", "globex", "L4", 1.0, 250.0)
BUDGETS = Budgets(tenant_gpus=(("acme", 1.0),), cluster_gpus=12)


def _sizing(held: tuple[tuple[str, int, str], ...] = ()) -> Sizing:
    return Sizing((), (), (ModelRequest("chat", 1, reason="tenant_gpu_budget:acme"),
                           ModelRequest("support", 2, reason="tenant_gpu_budget:acme"),
                           ModelRequest("vision", 3)),
                  (CHAT, SUPPORT, VISION),
                  budget_cuts=(("chat", "tenant_gpu_budget:acme"),
                               ("support", "tenant_gpu_budget:acme")),
                  cut_from=(("chat", 4), ("support", 6)), held=held)


def test_each_model_a_tenant_budget_cut_is_noted_sized_held_and_the_budgets_gpus() -> None:
    notes = [h.note() for h in budget_holds(_sizing(), BUDGETS)]
    assert notes == [
        "model chat: 4 replicas sized for its demand, 1 held: capped by "
        "tenant_gpu_budget:acme (1 GPU)",
        "model support: 6 replicas sized for its demand, 2 held: capped by "
        "tenant_gpu_budget:acme (1 GPU)"]


def test_a_model_whose_capped_hint_already_says_the_cut_gets_no_second_note() -> None:
    assert [h.model for h in budget_holds(_sizing(), BUDGETS, frozenset({"chat"}))] == [
        "support"]


def test_a_pool_cut_names_the_pool_without_gpus_and_a_cluster_cut_the_clusters() -> None:
    sizing = Sizing((), (), (ModelRequest("vision", 3),), (VISION,),
                    budget_cuts=(("vision", "pool_max_nodes:l4"),), cut_from=(("vision", 5),))
    (pool,) = budget_holds(sizing, BUDGETS)
    assert pool.note() == "model vision: 5 replicas sized for its demand, 3 held: capped by " \
        "pool_max_nodes:l4"
    cluster = Sizing((), (), (ModelRequest("vision", 3),), (VISION,),
                     budget_cuts=(("vision", "cluster_gpu_budget"),), cut_from=(("vision", 5),))
    assert budget_holds(cluster, BUDGETS)[0].note().endswith(
        "capped by cluster_gpu_budget (12 GPUs)")


def test_a_paused_model_a_pool_cut_is_said_sized_for_its_pause() -> None:
    sizing = Sizing((), (), (ModelRequest("vision", 3),), (VISION,),
                    budget_cuts=(("vision", "pool_max_nodes:l4"),), cut_from=(("vision", 8),),
                    held=(("vision", 8, "paused since ..."),))
    (hold,) = budget_holds(sizing, BUDGETS)
    assert hold.sized_for == FOR_PAUSE and "8 replicas sized for its pause, 3 held" in hold.note()


def test_no_cut_no_note() -> None:
    assert budget_holds(Sizing((), (), (ModelRequest("vision", 3),), (VISION,)), BUDGETS) == ()


def test_a_note_reads_back_to_the_hold_and_other_notes_to_none() -> None:
    holds = (*budget_holds(_sizing(), BUDGETS),
             BudgetHold("language/m-large", 40, 0, "pool_max_nodes:a100-80gb+h100"),
             BudgetHold("big", 9, 2, "tenant_gpu_budget:initech", 2.5, FOR_PAUSE))
    noted = holds_noted([*(h.note() for h in holds), "model bert-t4: unplaced: ...",
                         "demand hint on chat: 20000 rps announced, 124 replicas sized for "
                         "3968 rps: capped by pool_max_nodes:a100-80gb"])
    assert noted == {h.model: h for h in holds}
    assert noted["chat"].reason() == "tenant_gpu_budget:acme: 1 of 4 replicas held"
