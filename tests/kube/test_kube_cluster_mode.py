"""devlet's cluster mode against the real API server: three real nodes (kubelet and
containerd each, tests/kube/kube_cluster.py) and a devlet on each, run as the unit runs it,
reaching the API with a kubeconfig written by the packaged node-kubeconfig from the
packaged rbac.yaml, applied as shipped.

The device: one debugEcho device that every node sees (`shared: true`) with capacity 1.
Pods on all three nodes ask for it at once: exactly one runs in the cluster; the Leases
in the real API say which node holds the slot. Skips, with the reason, where the
cluster cannot run (not root, no cgroups); CI never does.
"""

import json
import os
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kube_cluster  # noqa: E402
from kube_cluster import wait_for  # noqa: E402
from test_kube_node import new_test_cluster, start_devlet  # noqa: E402

SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
SHARED_CONFIGURATION = """apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: shared-echo
spec:
  discoveryHandler:
    name: debugEcho
    discoveryDetails: |
      descriptions:
        - camera0
      shared: true
  capacity: 1
"""
RESOURCE = "akri.sh/shared-echo"


def write_node_kubeconfig(cluster, node, token_file=None):
    """The node's /etc/devlet/kubeconfig, written by the packaged script with the administrator's
    kubectl (a token of its own, or the one in token_file)."""
    kubectl = f"{os.path.join(cluster.bin_dir, 'kubectl')} --kubeconfig {cluster.admin_kubeconfig}"
    args = [os.path.join(SOURCE, "packaging", "cluster", "node-kubeconfig"), "--kubectl", kubectl]
    if token_file:
        args += ["--token-file", token_file]
    result = subprocess.run(args + [os.path.join(node.bound["/etc/devlet"], "kubeconfig")],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise kube_cluster.ClusterError(f"node-kubeconfig failed: {result.stdout}{result.stderr}")


class ClusterMode(unittest.TestCase):
    cluster = None

    @classmethod
    def setUpClass(cls):
        cls.cluster = new_test_cluster("cluster", ["node-a", "node-b", "node-c"])
        try:
            cls.cluster.start()
            cls.cluster.kubectl("apply", "-f", os.path.join(SOURCE, "packaging", "cluster", "rbac.yaml"))
            for node in cls.cluster.nodes:
                cls.set_up_devlet(node)
                start_devlet(node)
        except BaseException:
            cls.cluster.stop()
            raise
        print(f"cluster of 3 nodes started in {cls.cluster.timings['cluster']:.1f} s", file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        if cls.cluster:
            kube_cluster.stop_or_keep(cls.cluster)

    @classmethod
    def set_up_devlet(cls, node):
        etc = node.bound["/etc/devlet"]
        os.makedirs(os.path.join(etc, "conf.d"), exist_ok=True)
        write_node_kubeconfig(cls.cluster, node)
        with open(os.path.join(etc, "devlet.yaml"), "w") as f:
            f.write(f"nodeName: {node.name}\nstatus:\n  listen: 127.0.0.1:0\nkubelet:\n"
                    "  podResourcesIntervalSeconds: 1\n  slotReleaseGraceSeconds: 2\n"
                    "cluster:\n  kubeconfig: /etc/devlet/kubeconfig\n")
        with open(os.path.join(etc, "conf.d", "shared-echo.yaml"), "w") as f:
            f.write(SHARED_CONFIGURATION)


    # --- helpers ---

    def leases(self):
        items = self.cluster.get_json("/apis/coordination.k8s.io/v1/namespaces/devlet/leases")["items"]
        return {lease["metadata"]["name"]: lease for lease in items}

    def slot_leases(self):
        return {name: lease for name, lease in self.leases().items() if not name.startswith("node.")}

    def allocatable(self, node):
        return self.cluster.get_json(f"/api/v1/nodes/{node.name}")["status"].get("allocatable", {}).get(RESOURCE)

    def create_pod(self, name, node):
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "nodeSelector": {"kubernetes.io/hostname": node.name},
                "restartPolicy": "Never",
                "containers": [{"name": "c", "image": kube_cluster.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                                "command": ["sleep", "3600"], "resources": {"limits": {RESOURCE: "1"}}}],
            },
        }
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        self.addCleanup(self.cluster.kubectl, "delete", "pod", name, "--ignore-not-found", "--wait=true",
                        "--timeout=60s", check=False)

    def phases(self, names):
        return {name: self.cluster.get_json(f"/api/v1/namespaces/default/pods/{name}")["status"].get("phase")
                for name in names}

    def check_devlets(self):
        for node in self.cluster.nodes:
            node.devlet.check_alive()

    # --- the tests ---

    def test_1_packaged_rbac_and_kubeconfig_let_every_node_renew_its_lease(self):
        def all_node_leases():
            self.check_devlets()
            leases = self.leases()
            return all(f"node.{node.name}" in leases for node in self.cluster.nodes) and leases
        leases = wait_for("a node Lease per node", all_node_leases, 90)
        for node in self.cluster.nodes:
            self.assertEqual(leases[f"node.{node.name}"]["spec"]["holderIdentity"], node.name)
        for node in self.cluster.nodes:
            wait_for(f"{RESOURCE} allocatable on {node.name}", lambda: self.allocatable(node) == "1", 90)

    def test_2_concurrent_admissions_on_three_nodes_run_exactly_one_consumer(self):
        for node in self.cluster.nodes:
            wait_for(f"{RESOURCE} allocatable on {node.name}", lambda: self.allocatable(node) == "1", 90)
        names = [f"consumer-{node.name}" for node in self.cluster.nodes]
        for name, node in zip(names, self.cluster.nodes):
            self.create_pod(name, node)

        def settled():
            self.check_devlets()
            phases = self.phases(names)
            return "Running" in phases.values() and all(p in ("Running", "Failed") for p in phases.values()) \
                and phases
        phases = wait_for("one consumer running, the others refused", settled, 120,
                          on_timeout=lambda: f"\nphases: {self.phases(names)}")
        self.assertEqual(list(phases.values()).count("Running"), 1, phases)
        holder = [name for name, phase in phases.items() if phase == "Running"][0].removeprefix("consumer-")
        slots = self.slot_leases()
        self.assertEqual(len(slots), 1, slots)
        self.assertEqual(list(slots.values())[0]["spec"]["holderIdentity"], holder)
        # Still one, a while later.
        time.sleep(5)
        self.assertEqual(list(self.phases(names).values()).count("Running"), 1)

    def test_3_api_server_restarted_keeps_one_consumer_and_the_lease(self):
        for node in self.cluster.nodes:
            wait_for(f"{RESOURCE} allocatable on {node.name}", lambda: self.allocatable(node) == "1", 90)
        self.create_pod("before-restart", self.cluster.nodes[0])
        wait_for("the consumer running", lambda: self.phases(["before-restart"])["before-restart"] == "Running", 120)
        self.cluster.restart_apiserver()
        self.check_devlets()
        wait_for("the slot Lease again", lambda: len(self.slot_leases()) == 1, 60)
        self.create_pod("after-restart", self.cluster.nodes[1])
        wait_for("the second consumer refused or waiting", lambda: self.phases(["after-restart"])["after-restart"]
                 in ("Failed", "Pending") and self.phases(["after-restart"]), 60)
        time.sleep(5)
        phases = self.phases(["before-restart", "after-restart"])
        self.assertEqual(phases["before-restart"], "Running", phases)
        self.assertNotEqual(phases["after-restart"], "Running", phases)


if __name__ == "__main__":
    kube_cluster.test_main()
