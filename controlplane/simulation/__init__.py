"""``headroom simulate``: replay per-model demand through the real core on a simulated fleet."""
