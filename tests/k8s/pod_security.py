"""The Pod Security Standards' ``restricted`` profile (kubernetes.io/docs/concepts/security/
pod-security-standards, which the admission controller enforces for a namespace labelled
``pod-security.kubernetes.io/enforce: restricted``), as checks over a pod spec: what the
admission controller would name when it refuses the pod, [] when it admits it. One checker for
every pod Headroom puts in its namespace: its own Deployment and CronJob in deploy/ and the
warm-capacity placeholders it writes."""

from __future__ import annotations

from typing import Any

# the volume types the restricted profile allows
_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
            "persistentVolumeClaim", "projected", "secret"}
_SECCOMP = {"RuntimeDefault", "Localhost"}
_HOST = ("hostNetwork", "hostPID", "hostIPC")


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [container for field in ("initContainers", "containers", "ephemeralContainers")
            for container in pod.get(field) or []]


def restricted_problems(pod: dict[str, Any]) -> list[str]:
    """Why the ``restricted`` profile refuses the pod spec ``pod``; [] when it admits it."""
    problems = [f"{field} is true" for field in _HOST if pod.get(field)]
    pod_context = pod.get("securityContext") or {}
    for volume in pod.get("volumes") or []:
        kinds = set(volume) - {"name"}
        if not kinds <= _VOLUMES:
            problems.append(f"volume {volume.get('name')}: {', '.join(sorted(kinds))}")
    if pod_context.get("runAsUser") == 0:
        problems.append("pod runAsUser is 0")
    for container in _containers(pod):
        name = f"container {container.get('name')}"
        context = container.get("securityContext") or {}
        if context.get("privileged"):
            problems.append(f"{name}: privileged")
        if context.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation is not false")
        non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
        if non_root is not True:
            problems.append(f"{name}: runAsNonRoot is not true (in the pod or the container)")
        if context.get("runAsUser") == 0:
            problems.append(f"{name}: runAsUser is 0")
        seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {})
        if seccomp.get("type") not in _SECCOMP:
            problems.append(f"{name}: seccompProfile.type is not RuntimeDefault or Localhost "
                            "(in the pod or the container)")
        capabilities = context.get("capabilities") or {}
        if "ALL" not in (capabilities.get("drop") or []):
            problems.append(f"{name}: capabilities do not drop ALL")
        added = set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}
        if added:
            problems.append(f"{name}: adds capabilities {', '.join(sorted(added))}")
        if any(port.get("hostPort") for port in container.get("ports") or []):
            problems.append(f"{name}: uses a hostPort")
    return problems
