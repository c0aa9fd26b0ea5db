"""devlet on the real Kubernetes of tests/kube: prints, without asserting anything,
- the upstream components' build: the times build-upstream recorded, and a cache hit;
- the time to start the cluster (control plane and one node, Ready);
- pod created -> its container running with a devlet device (each of --pods pods in turn);
- kubelet restarted -> devlet's resources allocatable again;
- in cluster mode (one node, a kubeconfig from the packaged node-kubeconfig), the API
  requests per minute at rest as the real API server counts them (its /metrics), with the
  kubelet's own Lease renewals measured first, without devlet, and taken away.

Needs root, like the tests; DEVLET_BINARY names the daemon (meson sets it).
`meson test --benchmark -C build -v kube`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(SOURCE, "tests", "kube"))
import kube_cluster  # noqa: E402
from kube_cluster import wait_for  # noqa: E402

DEVLET = os.environ.get("DEVLET_BINARY", "")
CONFIGURATION = """apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: bench-echo
spec:
  discoveryHandler:
    name: debugEcho
    discoveryDetails: |
      descriptions: [dev0]
      shared: true
  capacity: 1
"""
RESOURCE = "akri.sh/bench-echo"


def build_figures():
    started = time.monotonic()
    out = subprocess.run([os.path.join(SOURCE, "tests", "kube", "build-upstream")], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()[-1]
    hit = time.monotonic() - started
    with open(os.path.join(out, "build.json")) as f:
        recorded = json.load(f)
    print(f"upstream build (as built into {os.path.basename(out)}): go build {recorded['timings']['go build']} s, "
          f"images {recorded['timings']['images']} s; cache hit {hit:.2f} s")
    return out


def allocatable(cluster, node):
    return cluster.get_json(f"/api/v1/nodes/{node.name}")["status"].get("allocatable", {}).get(RESOURCE)


def lease_requests(cluster):
    """apiserver_request_total summed over the Lease requests, by verb."""
    total = 0.0
    for line in cluster.get("/metrics", timeout=30).splitlines():
        if line.startswith("apiserver_request_total{") and 'resource="leases"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def start_devlet(node, cluster_mode):
    etc = node.bound["/etc/devlet"]
    os.makedirs(os.path.join(etc, "conf.d"), exist_ok=True)
    settings = f"nodeName: {node.name}\nstatus:\n  listen: 127.0.0.1:0\nkubelet:\n  podResourcesIntervalSeconds: 1\n" \
               "  slotReleaseGraceSeconds: 2\n"
    if cluster_mode:
        settings += "cluster:\n  kubeconfig: /etc/devlet/kubeconfig\n"
    with open(os.path.join(etc, "devlet.yaml"), "w") as f:
        f.write(settings)
    with open(os.path.join(etc, "conf.d", "bench-echo.yaml"), "w") as f:
        f.write(CONFIGURATION)
    node.devlet = kube_cluster.Process(f"devlet ({node.name})", [DEVLET, "run"],
                                       os.path.join(node.logs, "devlet.log"), namespace=node.namespace)


def pod_to_running(cluster, node, name):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
           "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
               "name": "c", "image": kube_cluster.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
               "command": ["sleep", "3600"], "resources": {"limits": {RESOURCE: "1"}}}]}}
    wait_for("the slot free", lambda: allocatable(cluster, node) == "1" and not cluster.get_json(
        "/api/v1/namespaces/default/pods")["items"], 120)
    started = time.monotonic()
    cluster.kubectl("create", "-f", "-", stdin=json.dumps(pod))
    wait_for(f"{name} running", lambda: cluster.get_json(f"/api/v1/namespaces/default/pods/{name}")["status"]
             .get("phase") == "Running", 120, interval=0.05)
    elapsed = time.monotonic() - started
    cluster.kubectl("delete", "pod", name, "--wait=true", "--timeout=60s")
    return elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=5)
    parser.add_argument("--rest-seconds", type=int, default=60)
    args = parser.parse_args()
    reason = kube_cluster.can_run_cluster()
    if reason or not DEVLET:
        print(f"SKIP: {reason or 'DEVLET_BINARY is not set'}")
        return 77
    upstream = build_figures()
    cluster = kube_cluster.Cluster("bench", os.path.join(upstream, "bin"), os.path.join(upstream, "images"),
                                   os.path.join(os.getcwd(), "kube-bench-logs"), nodes=["node-a"])
    try:
        cluster.start()
        node = cluster.nodes[0]
        print(f"cluster start (control plane and one node Ready): {cluster.timings['cluster']:.1f} s "
              f"(control plane {cluster.timings['control plane']:.1f} s)")

        # The kubelet's own Lease renewals, before devlet runs.
        cluster.kubectl("apply", "-f", os.path.join(SOURCE, "packaging", "cluster", "rbac.yaml"))
        before = lease_requests(cluster)
        time.sleep(args.rest_seconds)
        kubelet_only = (lease_requests(cluster) - before) * 60 / args.rest_seconds

        kubeconfig = os.path.join(node.bound["/etc/devlet"], "kubeconfig")
        subprocess.run([os.path.join(SOURCE, "packaging", "cluster", "node-kubeconfig"), "--kubectl",
                        f"{os.path.join(cluster.bin_dir, 'kubectl')} --kubeconfig {cluster.admin_kubeconfig}",
                        kubeconfig], check=True, capture_output=True)
        start_devlet(node, cluster_mode=True)
        wait_for("devlet's resource allocatable", lambda: allocatable(cluster, node) == "1", 120)

        times = [pod_to_running(cluster, node, f"bench-{i}") for i in range(args.pods)]
        print(f"pod created -> running with a devlet device: median {statistics.median(times):.2f} s, "
              f"min {min(times):.2f} s, max {max(times):.2f} s over {len(times)} pods")

        wait_for("the slot free", lambda: allocatable(cluster, node) == "1", 60)
        before = lease_requests(cluster)
        time.sleep(args.rest_seconds)
        with_devlet = (lease_requests(cluster) - before) * 60 / args.rest_seconds
        print(f"Lease requests per minute at rest, one node, real API server /metrics: kubelet alone "
              f"{kubelet_only:.1f}, with devlet in cluster mode {with_devlet:.1f}: devlet's own "
              f"{with_devlet - kubelet_only:.1f}")

        node.kubelet.stop()
        started = time.monotonic()
        node.start_kubelet()
        # devlet registers with the new kubelet, which then reports the resource again.
        wait_for("devlet's resource allocatable again after the kubelet's restart",
                 lambda: node.kubelet.check_alive() or (_registered_again(node) and allocatable(cluster, node) == "1"),
                 120, interval=0.05)
        print(f"kubelet restarted -> devlet's resource allocatable again: {time.monotonic() - started:.2f} s")
    finally:
        cluster.stop()
    return 0


def _registered_again(node):
    """Whether devlet logged a registration with the restarted kubelet."""
    with open(node.devlet.log_path, errors="replace") as f:
        return f.read().count("device plugin(s) registered with the kubelet") >= 2


if __name__ == "__main__":
    sys.exit(main())
