"""Kubernetes backend: the only package that imports ``kubernetes``. Build it with
``controlplane.adapters.k8s.backend.build_k8s_backend`` (see that module for the wiring)."""
