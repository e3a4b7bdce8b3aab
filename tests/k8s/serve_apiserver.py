"""Run the Kubernetes API test server on its own and write a kubeconfig pointing at it, e.g. to
run the real-cluster contract path against it:

    python tests/k8s/serve_apiserver.py --kubeconfig /tmp/headroom-test.kubeconfig &
    KUBECONFIG=/tmp/headroom-test.kubeconfig python -m pytest -m k8s tests/contract
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from apiserver import ApiServer


def kubeconfig(url: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {"server": url}}],
            "users": [{"name": "test", "user": {"token": "test"}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", type=Path, required=True, help="file to write")
    args = parser.parse_args()
    server = ApiServer().start()
    args.kubeconfig.write_text(yaml.safe_dump(kubeconfig(server.url)))
    print(f"API test server on {server.url}; kubeconfig {args.kubeconfig}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop.wait()
    server.stop()


if __name__ == "__main__":
    main()
