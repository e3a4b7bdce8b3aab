"""Names a caller gives (workload ids, nodes, models, tenants, GPU products, ...): each kind has
a length limit, and none may hold a control character (pure). The placement API refuses a name
that breaks them as INVALID_ARGUMENT naming the field (``scheduler.domain.validate``); the
models file and demand hints take model and tenant names by the same rule
(``controlplane.models_file``, ``controlplane.domain.hints``).

The limits follow what holds the names: a Kubernetes namespace and object name
(``<namespace>/<name>``, 63 + 1 + 253 = 317 characters) for workload ids; an object name (DNS
subdomain, 253) for node names, pools, versions and adapters; the store's models table for
models (200) and tenants (100); its product columns (and a Kubernetes label value, 63) for GPU
products (64); a MIG profile column (32); a Kubernetes label key (prefix 253, ``/``, name 63)
and value (63) for node labels."""

from __future__ import annotations

import re

from scheduler.domain.errors import InvalidArgument

#: a workload id (and ListBindings' workload_prefix): a Kubernetes namespace and object name,
#: ``<namespace>/<pod name>``, as a serving layer prefixes its ids with its tenant
MAX_WORKLOAD_ID_CHARS = 63 + 1 + 253
#: node names, pools, model versions, LoRA adapters: a Kubernetes object name's longest
MAX_NAME_CHARS = 253
#: a model name: the store's models table (``controlplane.store.tables.ModelRecord.name``)
MAX_MODEL_CHARS = 200
#: a tenant name: the store's models table (``ModelRecord.tenant``)
MAX_TENANT_CHARS = 100
#: a GPU product (``A100-80GB``, ``NVIDIA-H100-80GB-HBM3``): the store's product columns
MAX_PRODUCT_CHARS = 64
#: a MIG profile (``3g.40gb``, ``1g.10gb+me``): the store's mig_profile column
MAX_MIG_PROFILE_CHARS = 32
#: a node label's key (``nvidia.com/gpu.product``) and value, as Kubernetes allows them
MAX_LABEL_KEY_CHARS = 253 + 1 + 63
MAX_LABEL_VALUE_CHARS = 63

#: control characters (Unicode category Cc: NUL, newline, escape, ...), the line and paragraph
#: separators and the bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E,
#: U+2066 to U+2069), which make a name print as another one (U+202E turns ``x\u202egpj.exe``
#: into what looks like ``xexe.jpg``)
_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")


def name_problem(name: str, max_chars: int) -> str | None:
    """Why ``name`` is not a name, said after it ("workload_id: is 300 characters long, at most
    253"): longer than ``max_chars``, or holding a control or bidirectional character, named by
    its code point and position (the name itself is not echoed); or None."""
    if len(name) > max_chars:
        return f"is {len(name)} characters long, at most {max_chars}"
    found = _FORBIDDEN.search(name)
    if found is not None:
        return (f"holds the control character U+{ord(found.group()):04X} at {found.start()} "
                "(control and bidirectional characters are refused)")
    return None


def check_name(field: str, name: str, max_chars: int) -> None:
    """Raise InvalidArgument naming ``field`` when ``name`` is no name (``name_problem``)."""
    problem = name_problem(name, max_chars)
    if problem is not None:
        raise InvalidArgument(field, problem)
