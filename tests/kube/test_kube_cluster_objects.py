"""What devlet writes and reads in the real API server besides Leases: broker Pods, Jobs and
Services by server-side apply with the Node as owner, camera credentials from Secrets, and its
token renewed through the real TokenRequest. Two real nodes (kubelet and containerd each,
tests/kube/kube_cluster.py), a devlet on each run as the unit runs it, with the packaged
rbac.yaml applied as shipped and `devlet config rbac` for the Secret.

The devices:
- one simulated ONVIF camera (tests/probes/onvif/onvif_camera) on an address of the
  cluster's own bridge, which wants a user and password: both nodes see it (a shared
  instance, capacity 1) and take its credentials from a Secret; the configuration is
  Akri's broker-per-camera example with a busybox broker and both Services;
- a debugEcho device on node-a with a broker Job.
node-b starts with a token that expires after 40 seconds, signed with the cluster's
service-account key as a TokenRequest's token would be, so that devlet must renew it
through the real API before it runs out. Skips, with the reason, where the cluster cannot
run (not root, no cgroups); CI never does.
"""

import base64
import json
import os
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kube_cluster  # noqa: E402
from kube_cluster import wait_for  # noqa: E402
from test_kube_cluster_mode import SOURCE, write_node_kubeconfig  # noqa: E402
from test_kube_node import DEVLET, new_test_cluster, start_devlet  # noqa: E402

ONVIF_CAMERA = os.environ.get("DEVLET_ONVIF_CAMERA", "")
NAMESPACE = "devlet"
CAMERA_USER, CAMERA_PASSWORD = "operator", "Tr0ub4dor-e2e"
CAMERA_UUID = "5e2e0001-0000-4000-8000-000000000001"
SHORT_TOKEN_SECONDS = 40


def camera_configuration(image, link, camera_ip):
    return f"""apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: cameras
spec:
  discoveryHandler:
    name: onvif
    discoveryDetails: |
      interfaces: [{link}]
      unicastTargets: [{camera_ip}]
      rescanIntervalSeconds: 5
      discoveryTimeoutSeconds: 1
    discoveryProperties:
    - name: username_default
      valueFrom:
        secretKeyRef: {{name: camera-auth, namespace: default, key: username}}
    - name: password_default
      valueFrom:
        secretKeyRef: {{name: camera-auth, namespace: default, key: password}}
  capacity: 1
  brokerSpec:
    brokerPodSpec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: broker
        image: {image}
        imagePullPolicy: Never
        command: ["sh", "-c", "env | grep ^ONVIF_ | sort; echo started; sleep 3600"]
        resources:
          limits:
            "{{{{PLACEHOLDER}}}}": "1"
  instanceServiceSpec:
    type: ClusterIP
    ports:
    - name: rtsp
      port: 554
      protocol: TCP
      targetPort: 8554
  configurationServiceSpec:
    type: ClusterIP
    ports:
    - name: rtsp
      port: 554
      protocol: TCP
      targetPort: 8554
"""


def job_configuration(image):
    return f"""apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: sensor-job
spec:
  discoveryHandler:
    name: debugEcho
    discoveryDetails: |
      descriptions:
        - sensor0
      shared: false
  capacity: 1
  brokerSpec:
    brokerJobSpec:
      backoffLimit: 0
      template:
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 1
          containers:
          - name: job
            image: {image}
            imagePullPolicy: Never
            command: ["sh", "-c", "test \\"$DEBUG_ECHO_DESCRIPTION\\" = sensor0"]
            resources:
              limits:
                "{{{{PLACEHOLDER}}}}": "1"
"""


def typo_containers():
    """Containers with one field outside the schema each, and how a server-side apply names it."""
    return [({"name": "c", "imagePullPolicyy": "Always"},
             '.spec.containers[name="c"].imagePullPolicyy: field not declared in schema'),
            ({"name": "c", "ports": [{"containerPort": 80, "protocol": "TCP", "nme": "http"}]},
             '.spec.containers[name="c"].ports[containerPort=80,protocol="TCP"].nme: field not declared in schema')]


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def token_claims(token):
    return json.loads(b64url_decode(token.split(".")[1]))


def short_lived_token(cluster, lifetime_seconds):
    """A token of devlet's ServiceAccount that expires after lifetime_seconds: the claims of a
    real TokenRequest's token (the API server refuses to issue one shorter than 10 minutes),
    with new times, signed with the cluster's service-account key."""
    real = cluster.kubectl("create", "token", "devlet-node", "-n", NAMESPACE, "--duration=1h").stdout.strip()
    header_text, payload_text, _ = real.split(".")
    claims = json.loads(b64url_decode(payload_text))
    now = int(time.time())
    claims.update(iat=now, nbf=now, exp=now + lifetime_seconds, jti=str(uuid.uuid4()))
    signed = header_text + "." + b64url(json.dumps(claims, separators=(",", ":")).encode())
    signature = subprocess.run(["openssl", "dgst", "-sha256", "-sign", cluster.pki("sa.key")],
                               input=signed.encode(), capture_output=True, check=True).stdout
    return signed + "." + b64url(signature)


def kubeconfig_token(path):
    for line in open(path):
        if line.strip().startswith("token:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no token in {path}")


class ClusterObjects(unittest.TestCase):
    cluster = None
    camera = None

    @classmethod
    def setUpClass(cls):
        if not ONVIF_CAMERA:
            raise unittest.SkipTest("DEVLET_ONVIF_CAMERA is not set (meson sets it)")
        cls.cluster = new_test_cluster("objects", ["node-a", "node-b"])
        try:
            cls.cluster.start()
            cls.start_camera()
            cls.cluster.kubectl("apply", "-f", os.path.join(SOURCE, "packaging", "cluster", "rbac.yaml"))
            cls.short_token = short_lived_token(cls.cluster, SHORT_TOKEN_SECONDS)
            for node in cls.cluster.nodes:
                cls.set_up_devlet(node)
            # The Role for the camera's Secret, as devlet prints it for the configuration.
            rbac = subprocess.run([DEVLET, "config", "rbac", cls.conf_d(cls.cluster.nodes[0], "cameras.yaml")],
                                  capture_output=True, text=True, check=True).stdout
            cls.cluster.kubectl("apply", "-f", "-", stdin=rbac)
            for node in cls.cluster.nodes:
                start_devlet(node)
        except BaseException:
            cls.stop_all()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.stop_all()

    @classmethod
    def stop_all(cls):
        if cls.camera:
            cls.camera.stop()
        if cls.cluster:
            kube_cluster.stop_or_keep(cls.cluster)

    @classmethod
    def start_camera(cls):
        cls.camera_ip = f"10.250.{cls.cluster.subnet}.200"
        kube_cluster.run(["ip", "address", "add", cls.camera_ip + "/32", "dev", cls.cluster.link])
        cls.credentials_record = os.path.join(cls.cluster.log_dir, "camera-credentials.txt")
        ready = os.path.join(cls.cluster.state_dir, "camera.ready")
        cls.camera = kube_cluster.Process("onvif_camera", [
            ONVIF_CAMERA, "--address", cls.camera_ip, "--port", kube_cluster.free_port(), "--uuid", CAMERA_UUID,
            "--user", CAMERA_USER, "--password", CAMERA_PASSWORD, "--record-credentials", cls.credentials_record,
            "--ready-file", ready], os.path.join(cls.cluster.log_dir, "onvif_camera.log"))
        wait_for("the camera ready", lambda: cls.camera.check_alive() or os.path.exists(ready), 20)

    @classmethod
    def conf_d(cls, node, name):
        return os.path.join(node.bound["/etc/devlet"], "conf.d", name)

    @classmethod
    def set_up_devlet(cls, node):
        etc = node.bound["/etc/devlet"]
        os.makedirs(os.path.join(etc, "conf.d"), exist_ok=True)
        token_file = None
        if node.name == "node-b":
            token_file = os.path.join(cls.cluster.state_dir, "short-token")
            with open(token_file, "w") as f:
                f.write(cls.short_token)
        write_node_kubeconfig(cls.cluster, node, token_file=token_file)
        node.status_port = kube_cluster.free_port()
        with open(os.path.join(etc, "devlet.yaml"), "w") as f:
            f.write(f"nodeName: {node.name}\nstatus:\n  listen: 127.0.0.1:{node.status_port}\nkubelet:\n"
                    "  podResourcesIntervalSeconds: 1\n  slotReleaseGraceSeconds: 2\n"
                    "cluster:\n  kubeconfig: /etc/devlet/kubeconfig\n")
        with open(cls.conf_d(node, "cameras.yaml"), "w") as f:
            f.write(camera_configuration(kube_cluster.BUSYBOX_IMAGE, cls.cluster.link, cls.camera_ip))
        if node.name == "node-a":
            with open(cls.conf_d(node, "sensor-job.yaml"), "w") as f:
                f.write(job_configuration(kube_cluster.BUSYBOX_IMAGE))

    # --- helpers ---

    def status(self, node):
        node.devlet.check_alive()
        url = f"http://127.0.0.1:{node.status_port}/api/v1/status"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return json.loads(answer.read())

    def items(self, path):
        return self.cluster.get_json(path)["items"]

    def objects(self, kind, selector):
        group = "/apis/batch/v1" if kind == "jobs" else "/api/v1"
        return self.items(f"{group}/namespaces/{NAMESPACE}/{kind}?labelSelector={selector}")

    def managers(self, obj):
        return sorted(entry["manager"] for entry in obj["metadata"].get("managedFields", [])
                      if entry.get("operation") == "Apply")

    def devlet_logs(self):
        return "".join(open(node.devlet.log_path, errors="replace").read() for node in self.cluster.nodes)

    def on_timeout(self, *paths):
        def detail():
            text = ""
            for path in paths:
                try:
                    text += f"\n{path}: {json.dumps(self.cluster.get_json(path))[:3000]}"
                except Exception as error:  # noqa: BLE001 - only a report
                    text += f"\n{path}: {error}"
            for node in self.cluster.nodes:
                text += f"\n{node.name}'s devlet log ends:\n{kube_cluster.log_tail(node.devlet.log_path, 25)}"
            return text
        return detail

    def answer_to(self, token, path):
        """The API server's status code for a GET with this bearer token."""
        request = urllib.request.Request(self.cluster.server + path, headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, context=self.cluster.ca_context(), timeout=10) as answer:
                return answer.status
        except urllib.error.HTTPError as error:
            return error.code

    def camera_pods(self):
        return self.objects("pods", "akri.sh/configuration=cameras")

    # --- the tests ---

    def test_1_credentials_come_from_a_secret_created_later(self):
        node = self.cluster.nodes[0]
        wait_for("the missing Secret shown", lambda: any(
            "camera-auth" in problem for problem in self.status(node)["cluster"]["secretProblems"]), 60,
            on_timeout=lambda: f"\n{self.status(node)['cluster']}")
        self.assertFalse(os.path.exists(self.credentials_record) and open(self.credentials_record).read())

        secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "camera-auth", "namespace": "default"},
                  "stringData": {"username": CAMERA_USER, "password": CAMERA_PASSWORD}}
        self.cluster.kubectl("apply", "-f", "-", stdin=json.dumps(secret))
        for node in self.cluster.nodes:
            def read(node=node):
                cluster = self.status(node)["cluster"]
                entry = [s for s in cluster["secrets"] if s["name"] == "camera-auth"]
                return entry and entry[0]["read"] and entry[0]["exists"] and not cluster["secretProblems"] \
                    and entry[0]
            entry = wait_for(f"the Secret read on {node.name}", read, 60,
                             on_timeout=lambda node=node: f"\n{self.status(node)['cluster']}")
            self.assertEqual(sorted(entry["keys"]), ["password", "username"])
            self.assertIsNone(entry["error"])
        # The camera saw the credentials (its record names the sender and the kind, never the text).
        wait_for("the camera called with credentials", lambda: os.path.exists(self.credentials_record)
                 and open(self.credentials_record).read().strip(), 60, on_timeout=self.on_timeout())
        # The instance then has what only an authenticated camera tells.
        def described():
            instances = json.loads(urllib.request.urlopen(
                f"http://127.0.0.1:{node.status_port}/api/v1/instances", timeout=10).read())
            text = json.dumps(instances)
            return "ONVIF_DEVICE_MANUFACTURER" in text and text
        wait_for("the camera's details", described, 60)
        self.assertNotIn(CAMERA_PASSWORD, self.devlet_logs())

    def test_2_one_broker_runs_in_the_cluster_owned_by_its_node(self):
        def one_running():
            pods = self.camera_pods()
            running = [p for p in pods if p["status"].get("phase") == "Running"]
            return len(pods) == 1 and len(running) == 1 and running[0]
        pod = wait_for("one camera broker Pod in the cluster, running", one_running, 120,
                       on_timeout=self.on_timeout(f"/api/v1/namespaces/{NAMESPACE}/pods"))
        node_name = pod["metadata"]["labels"]["akri.sh/target-node"]
        self.assertEqual(pod["spec"]["nodeName"], node_name)
        self.assertEqual(pod["metadata"]["name"], f"{node_name}-{pod['metadata']['labels']['akri.sh/instance']}-pod")
        node_object = self.cluster.get_json(f"/api/v1/nodes/{node_name}")
        owners = pod["metadata"]["ownerReferences"]
        self.assertEqual([(o["kind"], o["name"], o["uid"]) for o in owners],
                         [("Node", node_name, node_object["metadata"]["uid"])])
        self.assertEqual(self.managers(pod), [f"devlet-{node_name}"])
        self.assertEqual(pod["metadata"]["labels"]["app.kubernetes.io/managed-by"], "devlet")
        instance = pod["metadata"]["labels"]["akri.sh/instance"]
        self.assertEqual(pod["spec"]["containers"][0]["resources"]["limits"], {f"akri.sh/{instance}": "1"})
        # The broker got the camera through the kubelet and devlet's Allocate.
        logs = wait_for("the broker's output", lambda: "started" in (out := self.cluster.kubectl(
            "logs", "-n", NAMESPACE, pod["metadata"]["name"]).stdout) and out, 60)
        self.assertIn(f"ONVIF_DEVICE_UUID={CAMERA_UUID}", logs)
        self.assertIn("ONVIF_DEVICE_MANUFACTURER=", logs)
        # Its slot Lease names the same node.
        leases = [lease for lease in self.items(f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases")
                  if not lease["metadata"]["name"].startswith("node.")]
        self.assertEqual([lease["spec"]["holderIdentity"] for lease in leases], [node_name])

        # Deleted by hand: made again, and still only one.
        self.cluster.kubectl("delete", "pod", "-n", NAMESPACE, pod["metadata"]["name"], "--wait=true", "--timeout=60s")
        again = wait_for("a broker made again", lambda: (p := one_running()) and
                         p["metadata"]["uid"] != pod["metadata"]["uid"] and p, 120,
                         on_timeout=self.on_timeout(f"/api/v1/namespaces/{NAMESPACE}/pods"))
        self.assertEqual(len(self.camera_pods()), 1)
        self.assertIn(again["metadata"]["labels"]["akri.sh/target-node"], ("node-a", "node-b"))

    def test_3_services_are_applied_by_every_node_that_offers_the_camera(self):
        def both():
            services = {s["metadata"]["name"]: s for s in self.objects("services", "akri.sh/configuration=cameras")}
            return len(services) == 2 and all(
                self.managers(s) == ["devlet-node-a", "devlet-node-b"] for s in services.values()) and services
        services = wait_for("the instance's and the configuration's Service, from both nodes", both, 60,
                            on_timeout=self.on_timeout(f"/api/v1/namespaces/{NAMESPACE}/services"))
        instance = self.camera_pods()[0]["metadata"]["labels"]["akri.sh/instance"]
        self.assertEqual(sorted(services), sorted(["cameras-svc", f"{instance}-svc"]))
        self.assertEqual(services["cameras-svc"]["spec"]["selector"], {"akri.sh/configuration": "cameras"})
        self.assertEqual(services[f"{instance}-svc"]["spec"]["selector"], {"akri.sh/instance": instance})
        for service in services.values():
            self.assertTrue(service["spec"]["clusterIP"])
            self.assertEqual([(p["port"], p["targetPort"]) for p in service["spec"]["ports"]], [(554, 8554)])
            self.assertNotIn("ownerReferences", service["metadata"])

    def test_4_a_broker_job_runs_to_completion_with_its_device(self):
        def succeeded():
            jobs = self.objects("jobs", "akri.sh/configuration=sensor-job")
            return len(jobs) == 1 and jobs[0].get("status", {}).get("succeeded") == 1 and jobs[0]
        job = wait_for("the broker Job succeeded", succeeded, 120,
                       on_timeout=self.on_timeout(f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
                                                  f"/api/v1/namespaces/{NAMESPACE}/pods"))
        instance = job["metadata"]["labels"]["akri.sh/instance"]
        self.assertRegex(job["metadata"]["name"], rf"^{instance}-[0-9a-f]{{8}}-job$")
        self.assertEqual(self.managers(job), ["devlet-node-a"])
        template = job["spec"]["template"]
        self.assertEqual(template["metadata"]["labels"]["akri.sh/instance"], instance)
        self.assertEqual(template["spec"]["containers"][0]["resources"]["limits"], {f"akri.sh/{instance}": "1"})
        # Done is done: the same spec is not run again while the device is offered.
        time.sleep(5)
        jobs = self.objects("jobs", "akri.sh/configuration=sensor-job")
        self.assertEqual([j["metadata"]["uid"] for j in jobs], [job["metadata"]["uid"]])

    def test_5_a_token_about_to_expire_is_renewed_through_the_token_request(self):
        node = self.cluster.nodes[1]
        kubeconfig = os.path.join(node.bound["/etc/devlet"], "kubeconfig")
        renewed = wait_for("node-b's token renewed", lambda: kubeconfig_token(kubeconfig) != self.short_token
                           and kubeconfig_token(kubeconfig), SHORT_TOKEN_SECONDS + 30,
                           on_timeout=lambda: f"\n{self.status(node)['cluster'].get('token')}")
        self.assertEqual(os.stat(kubeconfig).st_mode & 0o777, 0o600)
        claims, old = token_claims(renewed), token_claims(self.short_token)
        self.assertEqual(claims["sub"], old["sub"])
        self.assertEqual(claims["aud"], old["aud"])
        # devlet asks for the old token's lifetime; the real API server gives at least 10 minutes.
        self.assertGreaterEqual(claims["exp"] - claims["iat"], 600)
        token = self.status(node)["cluster"]["token"]
        self.assertEqual(token["kind"], "expiring")
        self.assertGreaterEqual(token["renewals"], 1)
        self.assertEqual(token["serviceAccount"], f"{NAMESPACE}/devlet-node")

        # Once the API server refuses the old token (a minute after its exp: go-jose's leeway),
        # devlet still renews its node Lease, with the new one.
        lease_path = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/node.{node.name}"
        wait_for("the old token refused", lambda: self.answer_to(self.short_token, lease_path) == 401,
                 max(0, old["exp"] + 60 - time.time()) + 30)
        self.assertEqual(self.answer_to(renewed, lease_path), 200)
        before = self.cluster.get_json(lease_path)["spec"]["renewTime"]
        wait_for("node-b's Lease renewed after the old token expired",
                 lambda: self.cluster.get_json(lease_path)["spec"]["renewTime"] != before, 60)
        self.assertEqual(self.status(node)["cluster"]["token"]["renewalFailures"], 0)

    def test_6_an_apply_with_a_field_outside_the_schema_is_refused_naming_items_by_key(self):
        # What the API double answers too (tests/cluster/test_kubectl_fidelity.py, the same words).
        # One unknown field per apply: the API server stops at the first one it meets in each
        # object, in an order that varies.
        for container, error in typo_containers():
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "typo-applied", "namespace": "default"},
                   "spec": {"containers": [dict(container, image=kube_cluster.BUSYBOX_IMAGE)]}}
            applied = self.cluster.kubectl("apply", "--validate=false", "--server-side",
                                           "--field-manager=devlet-node-a", "-f", "-", stdin=json.dumps(pod),
                                           check=False)
            self.assertNotEqual(applied.returncode, 0)
            self.assertIn("failed to create typed patch object (default/typo-applied; /v1, Kind=Pod): " + error,
                          applied.stderr)

    def test_9_objects_go_when_the_configurations_go(self):
        node_a, node_b = self.cluster.nodes
        wait_for("the Services from both nodes", lambda: len(self.objects(
            "services", "akri.sh/configuration=cameras")) == 2, 60)
        # node-a stops wanting them: node-b still applies the Services, now their only manager.
        os.remove(self.conf_d(node_a, "cameras.yaml"))
        def left_to_b():
            services = self.objects("services", "akri.sh/configuration=cameras")
            pods = [p for p in self.camera_pods() if p["spec"]["nodeName"] == "node-a"]
            return len(services) == 2 and not pods and all(
                self.managers(s) == ["devlet-node-b"] for s in services) and services
        wait_for("the Services left to node-b, no broker on node-a", left_to_b, 60,
                 on_timeout=self.on_timeout(f"/api/v1/namespaces/{NAMESPACE}/services"))
        # The last node to want them deletes them, and its broker.
        os.remove(self.conf_d(node_b, "cameras.yaml"))
        wait_for("no Service and no broker of the camera left", lambda: not self.objects(
            "services", "akri.sh/configuration=cameras") and not self.camera_pods(), 60,
            on_timeout=self.on_timeout(f"/api/v1/namespaces/{NAMESPACE}/services"))
        os.remove(self.conf_d(node_a, "sensor-job.yaml"))
        wait_for("the Job deleted", lambda: not self.objects("jobs", "akri.sh/configuration=sensor-job"), 60)
        for node in self.cluster.nodes:
            self.assertIsNone(self.status(node)["cluster"]["brokersError"])


if __name__ == "__main__":
    kube_cluster.test_main()
