"""Where traffic series come from: CSV traces (``replay``) and Prometheus (``prometheus``)."""
