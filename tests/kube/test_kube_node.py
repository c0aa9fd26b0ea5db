"""devlet on a real Kubernetes node: the pinned upstream kube-apiserver, scheduler,
controller manager, kubelet and containerd (tests/kube/kube_cluster.py), the real devlet
binary run as its unit runs it (`devlet run`, the packaged paths) in the node's mount
namespace, and pods in real containers.

The devices: the two demo debugEcho devices (capacity 2 each; the shipped example, its
availability file switched to make them go offline) and /dev/fuse through a udev rule
(capacity 1), as Akri's own end-to-end tests use a device node every machine has. Skips, with the reason, where the cluster cannot run (not root, no cgroups); CI
never does.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kube_cluster  # noqa: E402
from kube_cluster import ClusterError, wait_for  # noqa: E402

DEVLET = os.environ.get("DEVLET_BINARY", "")
FUSE_CONFIGURATION = """apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: fuse
spec:
  discoveryHandler:
    name: udev
    discoveryDetails: |
      udevRules:
        - 'SUBSYSTEM=="misc", KERNEL=="fuse"'
  capacity: 1
"""


def upstream_dir():
    """The built components: $DEVLET_UPSTREAM_DIR, else what build-upstream builds (or has)."""
    given = os.environ.get("DEVLET_UPSTREAM_DIR")
    if given:
        return given
    result = subprocess.run([os.path.join(HERE, "build-upstream")], capture_output=True, text=True)
    if result.returncode != 0:
        raise ClusterError(f"build-upstream failed:\n{result.stdout}{result.stderr}")
    return result.stdout.strip().splitlines()[-1]


def new_test_cluster(name, nodes):
    """A test class's cluster, not started: skips where none can run; its logs go to
    $DEVLET_E2E_LOGS/<name> (emptied first)."""
    reason = kube_cluster.can_run_cluster()
    if reason:
        raise unittest.SkipTest(reason)
    if not DEVLET:
        raise unittest.SkipTest("DEVLET_BINARY is not set (meson sets it)")
    upstream = upstream_dir()
    log_dir = os.path.join(os.environ.get("DEVLET_E2E_LOGS") or os.path.join(os.getcwd(), "kube-e2e-logs"), name)
    shutil.rmtree(log_dir, ignore_errors=True)
    return kube_cluster.Cluster(name, os.path.join(upstream, "bin"), os.path.join(upstream, "images"), log_dir,
                                nodes=nodes)


def start_devlet(node):
    """`devlet run` in the node's mount namespace, as its unit runs it."""
    node.devlet = kube_cluster.Process(f"devlet ({node.name})", [DEVLET, "run"],
                                       os.path.join(node.logs, "devlet.log"), namespace=node.namespace)


class RealNode(unittest.TestCase):
    cluster = None

    @classmethod
    def setUpClass(cls):
        cls.cluster = new_test_cluster("node", ["node-a"])
        cls.node = cls.cluster.nodes[0]
        try:
            cls.cluster.start()
            cls.write_devlet_files()
            start_devlet(cls.node)
        except BaseException:
            cls.cluster.stop()
            raise
        print(f"cluster started in {cls.cluster.timings['cluster']:.1f} s", file=sys.stderr)

    @classmethod
    def tearDownClass(cls):
        if cls.cluster:
            kube_cluster.stop_or_keep(cls.cluster)

    @classmethod
    def write_devlet_files(cls):
        etc = cls.node.bound["/etc/devlet"]
        os.makedirs(os.path.join(etc, "conf.d"), exist_ok=True)
        with open(os.path.join(etc, "devlet.yaml"), "w") as f:
            f.write(f"nodeName: {cls.node.name}\nstatus:\n  listen: 127.0.0.1:0\nkubelet:\n"
                    "  podResourcesIntervalSeconds: 1\n  slotReleaseGraceSeconds: 2\n")
        examples = os.path.join(HERE, "..", "..", "examples", "conf.d")
        shutil.copy(os.path.join(examples, "debug-echo.yaml"), os.path.join(etc, "conf.d", "debug-echo.yaml"))
        with open(os.path.join(etc, "conf.d", "fuse.yaml"), "w") as f:
            f.write(FUSE_CONFIGURATION)


    # --- helpers ---

    def node_resources(self, field="allocatable"):
        node = self.cluster.get_json(f"/api/v1/nodes/{self.node.name}")
        return {name: value for name, value in node["status"].get(field, {}).items() if name.startswith("akri.sh/")}

    def wait_resources(self, expected, field="allocatable", deadline=90):
        def match():
            self.node.devlet.check_alive()
            have = self.node_resources(field)
            return all(have.get(name) == value for name, value in expected.items()) and have
        return wait_for(f"{field} {expected}", match, deadline,
                        on_timeout=lambda: f"\nnode has {self.node_resources(field)}\ndevlet log ends:\n"
                                           f"{kube_cluster.log_tail(self.node.devlet.log_path)}")

    def wait_fuse_free(self):
        """The /dev/fuse slot free: offered through both of its resources."""
        self.wait_resources({"akri.sh/fuse": "1", self.instance_resource("fuse"): "1"})

    def instance_resource(self, configuration):
        """The one instance-level resource of a configuration with one device."""
        names = [name for name in self.node_resources("capacity") if name.startswith(f"akri.sh/{configuration}-")]
        self.assertEqual(len(names), 1, names)
        return names[0]

    def create_pod(self, name, resources, command="sleep 3600"):
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "c", "image": kube_cluster.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                    "command": ["sh", "-c", command],
                    "resources": {"limits": resources},
                }],
            },
        }
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
        self.addCleanup(self.delete_pod, name)

    def delete_pod(self, name):
        self.cluster.kubectl("delete", "pod", name, "--ignore-not-found", "--wait=true", "--timeout=60s", check=False)

    def pod(self, name):
        return self.cluster.get_json(f"/api/v1/namespaces/default/pods/{name}")

    def wait_running(self, name, deadline=120):
        def running():
            self.node.devlet.check_alive()
            return self.pod(name)["status"].get("phase") == "Running"
        return wait_for(f"pod {name} Running", running, deadline,
                        on_timeout=lambda: f"\npod status: {json.dumps(self.pod(name).get('status'))}")

    def wait_unschedulable(self, name, resource, deadline=60):
        def unschedulable():
            for condition in self.pod(name)["status"].get("conditions", []):
                if condition["type"] == "PodScheduled" and condition["status"] == "False":
                    return resource in condition.get("message", "") and condition["message"]
            return False
        return wait_for(f"pod {name} unschedulable for {resource}", unschedulable, deadline)

    def device_health(self, name):
        """The health the kubelet reports for each device of the pod's containers."""
        return [resource["health"] for container in self.pod(name)["status"].get("containerStatuses", [])
                for status in container.get("allocatedResourcesStatus", []) for resource in status["resources"]]

    def logs(self, name):
        return self.cluster.kubectl("logs", name, "-n", "default").stdout

    # --- the tests ---

    def test_1_node_shows_every_resource_in_capacity_and_allocatable(self):
        fuse = {"akri.sh/fuse": "1"}
        echo = {"akri.sh/akri-debug-echo": "4"}
        self.wait_resources({**fuse, **echo}, field="capacity")
        have = self.wait_resources({**fuse, **echo})
        instance_level = {name: value for name, value in have.items() if name.startswith("akri.sh/akri-debug-echo-")}
        self.assertEqual(sorted(instance_level.values()), ["2", "2"], have)
        self.assertEqual(have[self.instance_resource("fuse")], "1")

    def test_2_pod_runs_with_the_device_node_akris_environment_and_the_live_file(self):
        self.wait_fuse_free()
        self.create_pod("fuse-user", {"akri.sh/fuse": "1"},
                        "ls -l /dev/fuse; env | sort; cat \"$DEVLET_INFO_FILE\"; echo; echo done; sleep 3600")
        self.wait_running("fuse-user")
        output = wait_for("the pod's output", lambda: "done" in self.logs("fuse-user") and self.logs("fuse-user"), 60)
        self.assertRegex(output, r"c[rw-]{9} .* 10, +229 .*/dev/fuse")
        self.assertIn("UDEV_DEVNODE=/dev/fuse", output)
        self.assertIn("UDEV_DEVPATH=/devices/virtual/misc/fuse", output)
        self.assertIn("DEVLET_INFO_FILE=/run/devlet/info/devices.json", output)
        live = json.loads(output[output.index("{"):output.rindex("}") + 1])
        self.assertIn("fuse", json.dumps(live))

    def test_3_pod_over_capacity_stays_pending_and_runs_when_the_slot_is_free(self):
        instance = self.instance_resource("fuse")
        self.wait_fuse_free()
        self.create_pod("first", {"akri.sh/fuse": "1"})
        self.wait_running("first")
        # The one slot is shared: taken through the configuration-level resource, the
        # instance-level one has none left either.
        self.wait_resources({instance: "0"})
        self.create_pod("second", {"akri.sh/fuse": "1"})
        self.create_pod("by-instance", {instance: "1"})
        message = self.wait_unschedulable("second", "akri.sh/fuse")
        self.assertIn("Insufficient akri.sh/fuse", message)
        self.wait_unschedulable("by-instance", instance)
        self.delete_pod("first")
        wait_for("one of the waiting pods to run", lambda: [
            name for name in ("second", "by-instance") if self.pod(name)["status"].get("phase") == "Running"], 120)
        time.sleep(3)
        running = [name for name in ("second", "by-instance") if self.pod(name)["status"].get("phase") == "Running"]
        self.assertEqual(len(running), 1, running)

    def test_4_kubelet_restart_with_pods_running_gives_nothing_twice(self):
        self.wait_fuse_free()
        self.create_pod("holder", {"akri.sh/fuse": "1"})
        self.wait_running("holder")
        registrations = self.devlet_log().count("device plugin(s) registered with the kubelet")
        self.node.kubelet.stop()
        self.node.start_kubelet()
        wait_for("devlet to register again", lambda: self.devlet_log().count("device plugin(s) registered with the kubelet")
                 > registrations, 90, on_timeout=lambda: "\n" + kube_cluster.log_tail(self.node.devlet.log_path))
        self.node.wait_ready()
        instance = self.instance_resource("fuse")
        self.wait_resources({"akri.sh/fuse": "1", instance: "0"})
        self.create_pod("after-restart", {"akri.sh/fuse": "1"})
        self.wait_unschedulable("after-restart", "akri.sh/fuse")
        self.assertEqual(self.pod("holder")["status"]["phase"], "Running")

    def test_4b_kubelet_restarted_while_the_api_server_is_down_keeps_the_hold(self):
        # The kubelet comes back without its API server: PodResources lists no pod until it
        # can read them again. devlet must not take that for the pods being gone.
        self.wait_fuse_free()
        self.create_pod("partitioned", {"akri.sh/fuse": "1"})
        self.wait_running("partitioned")
        self.cluster.stop_apiserver()
        try:
            registrations = self.devlet_log().count("device plugin(s) registered with the kubelet")
            self.node.kubelet.stop()
            self.node.start_kubelet()
            wait_for("devlet to register with the kubelet again", lambda: self.devlet_log().count(
                "device plugin(s) registered with the kubelet") > registrations, 90)
            # Several release grace periods (2 s here) pass without the API server.
            time.sleep(10)
            self.node.kubelet.check_alive()
            self.assertNotIn("released (default/partitioned)", self.devlet_log())
        finally:
            self.cluster.start_apiserver()
        self.node.wait_ready()
        instance = self.instance_resource("fuse")
        self.wait_resources({"akri.sh/fuse": "1", instance: "0"})
        self.create_pod("not-while-held", {"akri.sh/fuse": "1"})
        self.wait_unschedulable("not-while-held", "akri.sh/fuse")
        self.assertEqual(self.pod("partitioned")["status"]["phase"], "Running")
        self.assertNotIn("released (default/partitioned)", self.devlet_log())

    def test_5_devlet_killed_and_restarted_keeps_the_pods_devices(self):
        self.wait_fuse_free()
        self.create_pod("kept", {"akri.sh/fuse": "1"})
        self.wait_running("kept")
        self.node.devlet.stop(sig=signal.SIGKILL)
        start_devlet(self.node)
        instance = self.instance_resource("fuse")
        self.wait_resources({"akri.sh/fuse": "1", instance: "0"})
        self.create_pod("not-twice", {"akri.sh/fuse": "1"})
        self.wait_unschedulable("not-twice", "akri.sh/fuse")
        self.assertEqual(self.pod("kept")["status"]["phase"], "Running")

    def test_6_device_gone_offline_is_unhealthy_to_the_kubelet(self):
        echo = {"akri.sh/akri-debug-echo": "4"}
        self.wait_resources(echo)
        self.create_pod("echo-user", {"akri.sh/akri-debug-echo": "1"})
        self.wait_running("echo-user")
        availability = "/tmp/devlet-debug-echo-availability.txt"
        self.addCleanup(lambda: os.path.exists(availability) and os.remove(availability))
        with open(availability, "w") as f:
            f.write("OFFLINE\n")
        # Gone: no slot allocatable any more, and no new pod gets one; the running pod's
        # status shows its device Unhealthy (the kubelet's allocatedResourcesStatus).
        self.wait_resources({"akri.sh/akri-debug-echo": "0"})
        wait_for("the pod's device Unhealthy", lambda: self.device_health("echo-user") == ["Unhealthy"], 60,
                 on_timeout=lambda: f"\npod status: {json.dumps(self.pod('echo-user')['status'])}")
        self.assertEqual(self.pod("echo-user")["status"]["phase"], "Running")
        with open(availability, "w") as f:
            f.write("")
        self.wait_resources(echo)
        wait_for("the pod's device Healthy again", lambda: self.device_health("echo-user") == ["Healthy"], 60)

    def test_7_deployment_scaled_up_and_down_leaks_no_slot_and_gives_none_twice(self):
        # The autoscaler's pattern: replicas up past the capacity, down, up again, to zero.
        capacity = 4
        self.wait_resources({"akri.sh/akri-debug-echo": str(capacity)})
        deployment = {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "echo-scale", "namespace": "default"},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "echo-scale"}},
                "template": {
                    "metadata": {"labels": {"app": "echo-scale"}},
                    "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                        "name": "c", "image": kube_cluster.BUSYBOX_IMAGE, "imagePullPolicy": "Never",
                        "command": ["sleep", "3600"], "resources": {"limits": {"akri.sh/akri-debug-echo": "1"}}}]},
                },
            },
        }
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(deployment))
        self.addCleanup(self.cluster.kubectl, "delete", "deployment", "echo-scale", "--ignore-not-found",
                        "--wait=true", "--timeout=60s", check=False)
        most_running = 0

        def running_pods():
            nonlocal most_running
            items = self.cluster.get_json("/api/v1/namespaces/default/pods?labelSelector=app%3Decho-scale")["items"]
            running = [p for p in items if p["status"].get("phase") == "Running"]
            most_running = max(most_running, len(running))
            self.assertLessEqual(len(running), capacity, "more pods run than there are slots")
            return [p for p in running if not p["metadata"].get("deletionTimestamp")]

        for replicas in (6, 1, 4, 0, 5, 2, 0, capacity):
            self.cluster.kubectl("scale", "deployment", "echo-scale", f"--replicas={replicas}")
            want = min(replicas, capacity)
            wait_for(f"{want} of {replicas} replicas running", lambda: len(running_pods()) == want, 180,
                     on_timeout=lambda: f"\nrunning: {len(running_pods())}\n"
                                        f"{kube_cluster.log_tail(self.node.devlet.log_path)}")
        # Back at the capacity after all that: every slot came back, none was lost.
        self.assertEqual(len(running_pods()), capacity)
        self.assertEqual(most_running, capacity)

    def devlet_log(self):
        with open(self.node.devlet.log_path, errors="replace") as f:
            return f.read()


if __name__ == "__main__":
    kube_cluster.test_main()
