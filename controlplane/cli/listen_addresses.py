"""The addresses ``headroom demo`` and ``headroom serve`` serve the placement API, its metrics
and its health checks on, checked with the API's TLS and token files before either command
touches a store or a log (``check_listen_addresses``): each must be bindable here and, for
``serve``, free and not the port of another of the three."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.metrics import check_bindable, host_and_port

if TYPE_CHECKING:
    from controlplane.settings import Settings


def check_listen_addresses(settings: Settings, config: Path | None,
                           ports_free: bool = False) -> None:
    """Fail before a store or a log is touched when an address to serve on cannot be bound
    here (an unknown host, one of another machine, a port above 65535) or, with
    ``ports_free``, when its port is taken (the demo takes a free one instead)."""
    from controlplane.placement_api import check_security_files
    from controlplane.settings import ConfigError

    placement = settings.placement
    addresses = (("placement.listen", placement.listen),
                 ("placement.metrics_listen", placement.metrics_listen),
                 ("placement.health_listen", placement.health_listen))
    for field, listen in addresses:
        if listen is not None:
            try:
                check_bindable(listen, port_free=ports_free)
            except ValueError as error:
                raise ConfigError(f"{config or 'configuration'}: {field}: {error}") from None
    check_security_files(placement, str(config or "configuration"))
    for i, (field, listen) in enumerate(addresses):
        for earlier, taken in addresses[:i]:
            if ports_free and listen is not None and taken is not None \
                    and _same_port(taken, listen):
                raise ConfigError(f"{config or 'configuration'}: {field}: {listen!r} is the "
                                  f"port of {earlier} {taken!r}; serve it on another port")


def _same_port(one: str, other: str) -> bool:
    """Whether two checked ``HOST:PORT`` addresses would bind the same port (0 never does)."""
    (host_a, port_a), (host_b, port_b) = host_and_port(one), host_and_port(other)
    anywhere = {"0.0.0.0", "[::]", "::", "*"}
    return port_a == port_b != 0 and (host_a == host_b or bool({host_a, host_b} & anywhere))
