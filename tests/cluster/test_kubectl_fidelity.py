"""Debian's kubectl (kubernetes-client) against the Kubernetes API double: discovery, get,
server-side and client-side apply, label and field selectors, replace with a stale
resourceVersion, delete, 401/403/404/409, and the garbage collection of a Node's pods."""

import base64
import json
import os
import select
import shutil
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kube_double  # noqa: E402

KUBECTL = kube_double.debian_kubectl()


class KubectlAgainstDouble(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.double = kube_double.KubeApiDouble(client_certificates=True)
        cls.admin = cls.double.kubeconfig(kube_double.ADMIN_TOKEN, "admin.kubeconfig", "devlet")
        cls.limited = cls.double.kubeconfig(kube_double.LIMITED_TOKEN, "limited.kubeconfig", "devlet")
        cls.bad = cls.double.kubeconfig("not-a-token", "bad.kubeconfig", "devlet")
        cls.kubectl("create", "namespace", "devlet")

    @classmethod
    def tearDownClass(cls):
        cls.double.close()

    @classmethod
    def kubectl(cls, *args, kubeconfig=None, stdin=None, check=True):
        # The discovery cache goes to the test's directory, not the user's ~/.kube.
        result = subprocess.run([KUBECTL, "--kubeconfig", kubeconfig or cls.admin, "--request-timeout=30s",
                                 "--cache-dir", os.path.join(cls.double.dir, "kube-cache"), *args],
                                input=stdin, capture_output=True, text=True)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stdout}{result.stderr}")
        return result

    def get_json(self, *args):
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def apply(self, manifest, *flags):
        return self.kubectl("apply", "--validate=false", *flags, "-f", "-", stdin=json.dumps(manifest))

    def test_unknown_field_is_dropped_with_a_warning_and_refused_by_server_side_apply(self):
        # kubectl 1.20 sends no fieldValidation: the server's default (Warn) drops the field
        # and says so in a Warning header, which kubectl prints.
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typo-created"},
               "spec": {"containers": [{"name": "c", "image": "nginx", "imagePullPolicyy": "Always"}]}}
        made = self.kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps(pod))
        self.assertIn('Warning: unknown field "spec.containers[0].imagePullPolicyy"', made.stderr)
        self.assertNotIn("imagePullPolicyy", self.get_json("pod", "typo-created")["spec"]["containers"][0])
        # Word for word what the real API server answers (tests/kube/test_kube_cluster_objects.py):
        # items of keyed lists named by their keys.
        pod["metadata"]["name"] = "typo-applied"
        for container, error in [({"name": "c", "image": "nginx", "imagePullPolicyy": "Always"},
                                  '.spec.containers[name="c"].imagePullPolicyy: field not declared in schema'),
                                 ({"name": "c", "image": "nginx",
                                   "ports": [{"containerPort": 80, "protocol": "TCP", "nme": "http"}]},
                                  '.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].nme: '
                                  "field not declared in schema")]:
            pod["spec"]["containers"] = [container]
            applied = self.kubectl("apply", "--validate=false", "--server-side", "--field-manager=devlet-node-a",
                                   "-f", "-", stdin=json.dumps(pod), check=False)
            self.assertNotEqual(applied.returncode, 0)
            self.assertIn("failed to create typed patch object (devlet/typo-applied; /v1, Kind=Pod): " + error,
                          applied.stderr)
        self.assertNotEqual(self.kubectl("get", "pod", "typo-applied", check=False).returncode, 0)

    def test_server_side_apply_creates_then_updates_a_lease(self):
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                 "metadata": {"name": "camera-slot-0", "labels": {"app": "devlet", "slot": "0"}},
                 "spec": {"holderIdentity": "node-a", "leaseDurationSeconds": 15}}
        out = self.apply(lease, "--server-side", "--field-manager=devlet-node-a").stdout
        self.assertIn("serverside-applied", out)
        got = self.get_json("lease", "camera-slot-0")
        self.assertEqual(got["spec"]["holderIdentity"], "node-a")
        managers = [m["manager"] for m in got["metadata"]["managedFields"]]
        self.assertIn("devlet-node-a", managers)
        first_version = got["metadata"]["resourceVersion"]
        # The same configuration again changes nothing, not even the resourceVersion.
        self.apply(lease, "--server-side", "--field-manager=devlet-node-a")
        self.assertEqual(self.get_json("lease", "camera-slot-0")["metadata"]["resourceVersion"], first_version)
        lease["spec"]["holderIdentity"] = "node-b"
        self.apply(lease, "--server-side", "--field-manager=devlet-node-a")
        got = self.get_json("lease", "camera-slot-0")
        self.assertEqual(got["spec"]["holderIdentity"], "node-b")
        self.assertNotEqual(got["metadata"]["resourceVersion"], first_version)

    def test_server_side_apply_conflict_needs_force(self):
        lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "contested"},
                 "spec": {"holderIdentity": "node-a"}}
        self.apply(lease, "--server-side", "--field-manager=devlet-node-a")
        lease["spec"]["holderIdentity"] = "node-b"
        result = self.kubectl("apply", "--validate=false", "--server-side", "--field-manager=devlet-node-b", "-f",
                              "-", stdin=json.dumps(lease), check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("conflict", result.stderr.lower())
        self.apply(lease, "--server-side", "--field-manager=devlet-node-b", "--force-conflicts")
        self.assertEqual(self.get_json("lease", "contested")["spec"]["holderIdentity"], "node-b")

    def test_client_side_apply_creates_and_patches_a_pod(self):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "broker-cam-1", "labels": {"akri.sh/instance": "cam-1", "tier": "broker"}},
               "spec": {"nodeName": "node-a",
                        "containers": [{"name": "broker", "image": "nginx:1",
                                        "resources": {"limits": {"akri.sh/cam-1": "1"}}},
                                       {"name": "sidecar", "image": "busybox:1"}]}}
        self.assertIn("created", self.apply(pod).stdout)
        pod["spec"]["containers"][0]["image"] = "nginx:2"
        self.assertIn("configured", self.apply(pod).stdout)
        got = self.get_json("pod", "broker-cam-1")
        images = {c["name"]: c["image"] for c in got["spec"]["containers"]}
        self.assertEqual(images, {"broker": "nginx:2", "sidecar": "busybox:1"})
        self.assertEqual(got["status"]["phase"], "Pending")

    def test_label_and_field_selectors_list_pods(self):
        for name, node, tier in [("sel-a", "node-1", "x"), ("sel-b", "node-2", "x"), ("sel-c", "node-1", "y")]:
            self.apply({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": name, "labels": {"suite": "selectors", "tier": tier}},
                        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}})
        names = lambda *args: sorted(i["metadata"]["name"] for i in self.get_json("pods", *args)["items"])
        self.assertEqual(names("-l", "suite=selectors,tier=x"), ["sel-a", "sel-b"])
        self.assertEqual(names("-l", "suite=selectors,tier!=x"), ["sel-c"])
        self.assertEqual(names("-l", "suite=selectors", "--field-selector", "spec.nodeName=node-1"),
                         ["sel-a", "sel-c"])
        self.assertEqual(names("-l", "suite in (selectors),tier notin (y)"), ["sel-a", "sel-b"])
        table = self.kubectl("get", "pods", "-l", "suite=selectors").stdout
        self.assertIn("sel-a", table)

    def test_services_jobs_and_secrets_round_trip(self):
        service = {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "cam-1-svc", "labels": {"akri.sh/instance": "cam-1"}},
                   "spec": {"selector": {"akri.sh/instance": "cam-1"}, "ports": [{"name": "rtsp", "port": 8554}]}}
        self.apply(service, "--server-side", "--field-manager=devlet-node-a")
        got = self.get_json("service", "cam-1-svc")
        self.assertTrue(got["spec"]["clusterIP"])
        self.assertEqual(got["spec"]["ports"][0]["targetPort"], 8554)
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "cam-1-job"},
               "spec": {"template": {"spec": {"restartPolicy": "Never",
                                              "containers": [{"name": "j", "image": "busybox"}]}}}}
        self.apply(job, "--server-side", "--field-manager=devlet-node-a")
        self.assertEqual(self.get_json("job", "cam-1-job")["spec"]["backoffLimit"], 6)
        self.kubectl("create", "secret", "generic", "cam-creds", "--from-literal=username=admin")
        secret = self.get_json("secret", "cam-creds")
        self.assertEqual(secret["data"]["username"], "YWRtaW4=")
        for kind, name in [("service", "cam-1-svc"), ("job", "cam-1-job"), ("secret", "cam-creds")]:
            self.assertIn("deleted", self.kubectl("delete", kind, name).stdout)
            missing = self.kubectl("get", kind, name, check=False)
            self.assertNotEqual(missing.returncode, 0)
            self.assertIn("NotFound", missing.stderr)

    def test_create_twice_is_already_exists(self):
        self.kubectl("create", "secret", "generic", "twice", "--from-literal=a=b")
        again = self.kubectl("create", "secret", "generic", "twice", "--from-literal=a=b", check=False)
        self.assertNotEqual(again.returncode, 0)
        self.assertIn("AlreadyExists", again.stderr)

    def test_replace_with_a_stale_resource_version_is_a_conflict(self):
        self.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "stale"},
                    "spec": {"holderIdentity": "node-a"}})
        old = self.get_json("lease", "stale")
        self.kubectl("patch", "lease", "stale", "--type", "merge", "-p", '{"spec":{"holderIdentity":"node-b"}}')
        old["spec"]["holderIdentity"] = "node-c"
        result = self.kubectl("replace", "--validate=false", "-f", "-", stdin=json.dumps(old), check=False)
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("Conflict", result.stderr)
        self.assertIn("the object has been modified", result.stderr)
        self.assertEqual(self.get_json("lease", "stale")["spec"]["holderIdentity"], "node-b")

    def test_delete_by_label(self):
        for i in range(3):
            self.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                        "metadata": {"name": f"bulk-{i}", "labels": {"batch": "bulk"}}, "spec": {}})
        self.kubectl("delete", "leases", "-l", "batch=bulk")
        self.assertEqual(self.get_json("leases", "-l", "batch=bulk")["items"], [])

    def test_deleting_a_node_collects_its_pods(self):
        self.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-gc"}})
        node = self.get_json("node", "node-gc")
        self.apply({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": "owned-by-node",
                                 "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": "node-gc",
                                                      "uid": node["metadata"]["uid"]}]},
                    "spec": {"nodeName": "node-gc", "containers": [{"name": "c", "image": "busybox"}]}})
        self.kubectl("delete", "node", "node-gc")
        missing = self.kubectl("get", "pod", "owned-by-node", check=False)
        self.assertIn("NotFound", missing.stderr)

    def test_forbidden_and_unauthorized(self):
        forbidden = self.kubectl("get", "secrets", kubeconfig=self.limited, check=False)
        self.assertNotEqual(forbidden.returncode, 0)
        self.assertIn("Forbidden", forbidden.stderr)
        self.assertEqual(self.kubectl("get", "leases", kubeconfig=self.limited).returncode, 0)
        unauthorized = self.kubectl("get", "leases", kubeconfig=self.bad, check=False)
        self.assertNotEqual(unauthorized.returncode, 0)
        self.assertIn("Unauthorized", unauthorized.stderr + unauthorized.stdout)

    def test_get_watch_sees_a_new_lease(self):
        watcher = subprocess.Popen([KUBECTL, "--kubeconfig", self.admin, "--cache-dir",
                                    os.path.join(self.double.dir, "kube-cache"), "get", "leases", "--watch-only",
                                    "-o", "name"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while self.double.control("GET", "requests")["activeWatches"] < 1:
                self.assertLess(time.monotonic(), deadline, "kubectl never started its watch")
                time.sleep(0.05)
            self.apply({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "watched"},
                        "spec": {"holderIdentity": "node-a"}})
            ready, _, _ = select.select([watcher.stdout], [], [], 30)
            self.assertTrue(ready, "kubectl printed nothing")
            self.assertEqual(watcher.stdout.readline().strip(), "lease.coordination.k8s.io/watched")
        finally:
            watcher.terminate()
            watcher.wait()

    def test_client_certificate_kubeconfig(self):
        kubeconfig = self.double.cert_kubeconfig(namespace="devlet")
        self.assertEqual(self.kubectl("get", "leases", kubeconfig=kubeconfig).returncode, 0)
        self.assertEqual(self.double.control("GET", "requests")["recent"][-1]["user"], "devlet-test")

    def test_requests_are_counted(self):
        before = self.double.control("GET", "requests")["counts"].get("list leases", 0)
        self.kubectl("get", "leases")
        after = self.double.control("GET", "requests")["counts"].get("list leases", 0)
        self.assertEqual(after, before + 1)

    def test_create_token_for_a_service_account(self):
        # node-kubeconfig's way to a token; Debian's kubectl 1.20 has no `create token` (1.24+).
        kubectl = token_kubectl()
        if not kubectl:
            self.skipTest("no kubectl with `create token` (1.24 or newer; set KUBECTL_CREATE_TOKEN)")
        self.kubectl("create", "serviceaccount", "devlet-node", "-n", "devlet")
        self.double.control("POST", "token-lifetime", {"maxExpirationSeconds": 7200})
        try:
            def create_token(*args):
                return subprocess.run([kubectl, "--kubeconfig", self.admin, "--request-timeout=30s", "create",
                                       "token", *args], capture_output=True, text=True)

            made = create_token("devlet-node", "-n", "devlet", "--duration=8760h")
            self.assertEqual(made.returncode, 0, made.stderr)
            token = made.stdout.strip()
            payload = token.split(".")[1]
            claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
            self.assertEqual(claims["sub"], "system:serviceaccount:devlet:devlet-node")
            self.assertEqual(claims["exp"] - claims["iat"], 7200)  # cut to the server's maximum
            self.assertEqual(claims["kubernetes.io"]["serviceaccount"]["name"], "devlet-node")
            # The token it issued authenticates as the ServiceAccount.
            status, _ = self.double.request("GET", "/apis/coordination.k8s.io/v1/namespaces/devlet/leases",
                                            token=token)
            self.assertEqual(status, 200)
            self.assertEqual(self.double.control("GET", "requests")["recent"][-1]["user"],
                             "system:serviceaccount:devlet:devlet-node")
            # As the API server: less than 10 minutes is refused, a missing account is 404.
            short = create_token("devlet-node", "-n", "devlet", "--duration=1m")
            self.assertNotEqual(short.returncode, 0)
            self.assertIn("may not specify a duration less than 10 minutes", short.stderr)
            missing = create_token("nobody", "-n", "devlet")
            self.assertNotEqual(missing.returncode, 0)
            self.assertIn("not found", missing.stderr)
        finally:
            self.double.control("POST", "token-lifetime", {"maxExpirationSeconds": 0})


def token_kubectl():
    """A kubectl that has `create token` (1.24 or newer): $KUBECTL_CREATE_TOKEN, else the
    one on PATH when it has it."""
    candidate = os.environ.get("KUBECTL_CREATE_TOKEN") or shutil.which("kubectl")
    if not candidate:
        return None
    result = subprocess.run([candidate, "create", "token", "--help"], capture_output=True, text=True)
    return candidate if result.returncode == 0 else None


if __name__ == "__main__":
    if not KUBECTL:
        kube_double.skip("Debian's kubectl 1.20 (package kubernetes-client) is not installed")
    unittest.main(verbosity=2)
