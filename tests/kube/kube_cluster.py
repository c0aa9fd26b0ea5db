"""A real Kubernetes cluster on this machine, for devlet's end-to-end tests.

One control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) and one
or more nodes, each a containerd, a kubelet and (started by the tests) a devlet. The
binaries are the pinned upstream components tests/kube/build-upstream builds.

Each node lives in a mount namespace of its own, kept in a file (`nsenter --mount=FILE`),
where its own directories are bound over the real paths: /var/lib/kubelet, /etc/devlet,
/var/lib/devlet, /run/devlet. So every kubelet and every devlet runs at the paths a real
node has (the kubelet's device-plugin socket is fixed at
/var/lib/kubelet/device-plugins/kubelet.sock whatever its root directory), and three
nodes on one machine do not see each other's sockets. The nodes share the host's
network: components listen on 127.0.0.1 on ports chosen at start; pods get addresses on a
bridge per node.

State lives under a short directory in /run (unix socket paths are limited to 108
bytes); logs go to the log directory given, which is kept. stop() leaves no process,
mount, cgroup, bridge or namespace behind, also after a run that was killed: start()
first cleans what a previous run under the same name left.
"""

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import unittest
import urllib.request
import warnings
import zlib

KUBERNETES_VERSION = "v1.36.3"
PAUSE_IMAGE = "localhost/devlet-e2e/pause:1"
BUSYBOX_IMAGE = "localhost/devlet-e2e/busybox:1"
# The gates the DRA driver will need, set on every component (on by default in 1.36 or
# beta; named so that a version where one is missing fails loudly at start).
FEATURE_GATES = "DRAExtendedResource=true,DRAConsumableCapacity=true,DRADeviceTaints=true"
CGROUP_CONTROLLERS_ROOT = "/sys/fs/cgroup"


class ClusterError(Exception):
    pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, check=True, **kwargs):
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if check and result.returncode != 0:
        raise ClusterError(f"{' '.join(map(str, args))} failed ({result.returncode}): {result.stdout}{result.stderr}")
    return result


def wait_for(what, condition, deadline_seconds, interval=0.2, on_timeout=None):
    """Calls condition() until it returns a true value, which it returns; raises after the deadline."""
    deadline = time.monotonic() + deadline_seconds
    last_error = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except ClusterError:
            raise  # a component died: waiting longer changes nothing
        except Exception as error:  # noqa: BLE001 - reported at the deadline
            last_error = error
        time.sleep(interval)
    detail = f" (last error: {last_error})" if last_error else ""
    extra = on_timeout() if on_timeout else ""
    raise ClusterError(f"timed out after {deadline_seconds} s waiting for {what}{detail}{extra}")


def log_tail(path, lines=40):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def can_run_cluster():
    """None when this machine can run the cluster, else why not."""
    if os.geteuid() != 0:
        return "the real cluster needs root (mount namespaces, cgroups, bridges)"
    if not os.path.isdir(os.path.join(CGROUP_CONTROLLERS_ROOT, "memory")) and not os.path.exists(
            os.path.join(CGROUP_CONTROLLERS_ROOT, "cgroup.controllers")):
        return "no cgroup hierarchy at /sys/fs/cgroup"
    for tool in ("nsenter", "unshare", "openssl", "runc"):
        if not shutil.which(tool) and not os.path.exists("/usr/sbin/" + tool):
            return f"{tool} is not installed (scripts/install-deps installs it)"
    if not os.path.exists("/usr/lib/cni/bridge"):
        return "the CNI plugins are not installed (containernetworking-plugins)"
    return None


def _processes():
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _namespace_inode(pid):
    try:
        return os.stat(f"/proc/{pid}/ns/mnt").st_ino
    except OSError:
        return None


def _kill_all(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _cgroup_dirs(root_name):
    """Every cgroup directory named root_name at the top of a hierarchy (v1 or v2)."""
    found = []
    if os.path.exists(os.path.join(CGROUP_CONTROLLERS_ROOT, "cgroup.controllers")):
        path = os.path.join(CGROUP_CONTROLLERS_ROOT, root_name)
        if os.path.isdir(path):
            found.append(path)
        return found
    for hierarchy in os.listdir(CGROUP_CONTROLLERS_ROOT):
        path = os.path.join(CGROUP_CONTROLLERS_ROOT, hierarchy, root_name)
        if os.path.isdir(path) and not os.path.islink(os.path.join(CGROUP_CONTROLLERS_ROOT, hierarchy)):
            found.append(path)
    return found


def _make_cgroups(root_name):
    """The cgroup the kubelet is given as its root, in every hierarchy (the kubelet wants it
    to exist); in cgroup v1's cpuset its CPUs and memory nodes are copied from the parent."""
    if os.path.exists(os.path.join(CGROUP_CONTROLLERS_ROOT, "cgroup.controllers")):
        os.makedirs(os.path.join(CGROUP_CONTROLLERS_ROOT, root_name), exist_ok=True)
        return
    for hierarchy in os.listdir(CGROUP_CONTROLLERS_ROOT):
        parent = os.path.join(CGROUP_CONTROLLERS_ROOT, hierarchy)
        if os.path.islink(parent) or not os.path.isdir(parent) or hierarchy == "unified":
            continue
        path = os.path.join(parent, root_name)
        os.makedirs(path, exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if os.path.exists(os.path.join(parent, name)):
                with open(os.path.join(parent, name)) as f:
                    value = f.read().strip()
                with open(os.path.join(path, name), "w") as f:
                    f.write(value)


def _remove_cgroups(root_name, deadline_seconds=20):
    """Kills every task below the cgroups named root_name and removes them, deepest first."""
    deadline = time.monotonic() + deadline_seconds
    while True:
        remaining = False
        for top in _cgroup_dirs(root_name):
            for directory, _, _ in sorted(os.walk(top), key=lambda entry: -entry[0].count("/")):
                try:
                    with open(os.path.join(directory, "cgroup.procs")) as f:
                        _kill_all(int(line) for line in f if line.strip())
                except OSError:
                    pass
                try:
                    os.rmdir(directory)
                except OSError:
                    remaining = True
        if not remaining or time.monotonic() > deadline:
            return not remaining
        time.sleep(0.2)


class Process:
    def __init__(self, name, args, log_path, env=None, namespace=None):
        self.name = name
        self.log_path = log_path
        command = list(map(str, args))
        if namespace:
            command = ["nsenter", f"--mount={namespace}", "--"] + command
        self.log = open(log_path, "ab")
        self.popen = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True)

    def alive(self):
        return self.popen.poll() is None

    def check_alive(self):
        if not self.alive():
            raise ClusterError(f"{self.name} exited with {self.popen.returncode}; its log "
                               f"({self.log_path}) ends:\n{log_tail(self.log_path)}")

    def stop(self, sig=signal.SIGTERM, grace=15):
        if self.alive():
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.popen.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(10)
        self.log.close()


class Node:
    """One node's directories, mount namespace, containerd and kubelet."""

    def __init__(self, cluster, index, name):
        self.cluster = cluster
        self.index = index
        self.name = name
        self.dir = os.path.join(cluster.state_dir, name)
        self.namespace = os.path.join(cluster.state_dir, "ns", name)
        self.logs = os.path.join(cluster.log_dir, name)
        self.kubelet_port = free_port()
        self.kubelet_healthz_port = free_port()
        self.cgroup_root = f"dle-{cluster.name}-{name}"
        self.bridge = f"dle{index}-{cluster.name}"[:15]
        self.pod_subnet = f"10.244.{index}.0/24"
        # The kubelet refuses a loopback node IP: each node has an address of its own on the
        # cluster's own bridge (no ports; local addresses need no carrier), where the API server reaches its kubelet.
        self.ip = f"10.250.{cluster.subnet}.{index}"
        self.containerd = None
        self.kubelet = None
        self.devlet = None
        # The real paths a node has, each bound to a directory of this node.
        self.bound = {
            "/var/lib/kubelet": os.path.join(self.dir, "var-lib-kubelet"),
            "/etc/devlet": os.path.join(self.dir, "etc-devlet"),
            "/var/lib/devlet": os.path.join(self.dir, "var-lib-devlet"),
            "/run/devlet": os.path.join(self.dir, "run-devlet"),
        }

    @property
    def containerd_socket(self):
        return os.path.join(self.dir, "containerd", "containerd.sock")

    def in_namespace(self, args, check=True, **kwargs):
        return run(["nsenter", f"--mount={self.namespace}", "--"] + list(map(str, args)), check=check, **kwargs)

    def make_namespace(self):
        for directory in list(self.bound.values()) + [self.logs, os.path.join(self.dir, "containerd")]:
            os.makedirs(directory, exist_ok=True)
        for real_path in self.bound:  # the mount points on the host; removed at stop if made here
            if not os.path.exists(real_path):
                os.makedirs(real_path)
                with open(self.cluster.made_paths_file, "a") as f:
                    f.write(real_path + "\n")
        open(self.namespace, "w").close()
        run(["unshare", f"--mount={self.namespace}", "--propagation", "private", "true"])
        for real_path, own in self.bound.items():
            self.in_namespace(["mount", "--bind", own, real_path])
        # Volumes the kubelet mounts must reach containerd's containers: shared inside the node.
        self.in_namespace(["mount", "--make-rshared", "/"])

    def write_configuration(self):
        c = self.cluster
        cni_conf = os.path.join(self.dir, "cni", "net.d")
        os.makedirs(cni_conf, exist_ok=True)
        with open(os.path.join(cni_conf, "10-devlet-e2e.conflist"), "w") as f:
            json.dump({
                "cniVersion": "1.0.0",
                "name": f"devlet-e2e-{self.name}",
                "plugins": [
                    {"type": "bridge", "bridge": self.bridge, "isGateway": True, "ipMasq": False,
                     "ipam": {"type": "host-local", "ranges": [[{"subnet": self.pod_subnet}]],
                              "dataDir": os.path.join(self.dir, "cni", "ipam")}},
                ],
            }, f, indent=1)
        containerd_dir = os.path.join(self.dir, "containerd")
        with open(os.path.join(containerd_dir, "config.toml"), "w") as f:
            f.write(f"""version = 3
root = "{containerd_dir}/root"
state = "{containerd_dir}/state"

[grpc]
  address = "{self.containerd_socket}"

[ttrpc]
  address = "{containerd_dir}/ttrpc.sock"

[debug]
  level = "info"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{PAUSE_IMAGE}"

[plugins."io.containerd.cri.v1.runtime"]
  # Test machines may withhold CAP_SYS_RESOURCE, without which no process may lower an
  # OOM score (the pause container asks for -998): scores are kept at containerd's own.
  restrict_oom_score_adj = true
  enable_cdi = true
  cdi_spec_dirs = ["{self.dir}/cdi"]
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{c.runc}"
        Root = "{containerd_dir}/runc"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{cni_conf}"
""")
        kubelet_dir = os.path.join(self.dir, "kubelet-config")
        os.makedirs(kubelet_dir, exist_ok=True)
        with open(os.path.join(kubelet_dir, "config.yaml"), "w") as f:
            json.dump({
                "apiVersion": "kubelet.config.k8s.io/v1beta1",
                "kind": "KubeletConfiguration",
                "address": self.ip,
                "port": self.kubelet_port,
                "readOnlyPort": 0,
                "healthzBindAddress": "127.0.0.1",
                "healthzPort": self.kubelet_healthz_port,
                "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                                   "x509": {"clientCAFile": c.pki("ca.crt")}},
                "authorization": {"mode": "Webhook"},
                "containerRuntimeEndpoint": f"unix://{self.containerd_socket}",
                # cgroup v1 (or hybrid) hierarchy, no systemd as PID 1.
                "cgroupDriver": "cgroupfs",
                "cgroupRoot": "/" + self.cgroup_root,
                "failCgroupV1": False,
                "failSwapOn": False,
                "clusterDomain": "cluster.local",
                "resolvConf": "/etc/resolv.conf" if os.path.exists("/etc/resolv.conf") else "",
                # A test machine's disk may be fuller than a node's: never evict for it.
                "evictionHard": {"memory.available": "1Mi", "nodefs.available": "0%", "imagefs.available": "0%",
                                 "nodefs.inodesFree": "0%"},
                "imageGCHighThresholdPercent": 100,
                "imageGCLowThresholdPercent": 99,
                "featureGates": {gate: value == "true"
                                 for gate, value in (pair.split("=") for pair in FEATURE_GATES.split(","))},
                "serializeImagePulls": False,
                "nodeStatusReportFrequency": "10s",
                "syncFrequency": "10s",
            }, f, indent=1)
        c.write_kubeconfig(os.path.join(kubelet_dir, "kubeconfig"), f"kubelet-{self.name}")

    def start_containerd(self):
        c = self.cluster
        env = dict(os.environ, PATH=f"{c.bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin")
        self.containerd = Process(f"containerd ({self.name})",
                                  [os.path.join(c.bin_dir, "containerd"), "--config",
                                   os.path.join(self.dir, "containerd", "config.toml")],
                                  os.path.join(self.logs, "containerd.log"), env=env, namespace=self.namespace)
        wait_for(f"containerd of {self.name}", lambda: self.containerd.check_alive() or os.path.exists(
            self.containerd_socket), 60)
        for image in ("pause.tar", "busybox.tar"):
            self.ctr(["images", "import", "--no-unpack", os.path.join(c.images_dir, image)])

    def ctr(self, args, check=True):
        return self.in_namespace([os.path.join(self.cluster.bin_dir, "ctr"), "--address", self.containerd_socket,
                                  "--namespace", "k8s.io"] + args, check=check)

    def start_kubelet(self):
        c = self.cluster
        _make_cgroups(self.cgroup_root)
        kubelet_dir = os.path.join(self.dir, "kubelet-config")
        env = dict(os.environ, PATH=f"{c.bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin")
        self.kubelet = Process(f"kubelet ({self.name})", [
            os.path.join(c.bin_dir, "kubelet"),
            "--config", os.path.join(kubelet_dir, "config.yaml"),
            "--kubeconfig", os.path.join(kubelet_dir, "kubeconfig"),
            "--hostname-override", self.name,
            "--node-ip", self.ip,
            "--cert-dir", os.path.join(self.dir, "kubelet-pki"),
            "--v", "2",
        ], os.path.join(self.logs, "kubelet.log"), env=env, namespace=self.namespace)

    def wait_ready(self, deadline_seconds=120):
        def ready():
            self.kubelet.check_alive()
            node = self.cluster.get_json(f"/api/v1/nodes/{self.name}")
            conditions = {cond["type"]: cond["status"] for cond in node.get("status", {}).get("conditions", [])}
            return conditions.get("Ready") == "True"
        wait_for(f"node {self.name} Ready", ready, deadline_seconds,
                 on_timeout=lambda: f"\nkubelet log ends:\n{log_tail(self.kubelet.log_path)}")

    def stop(self):
        for process in (self.devlet, self.kubelet, self.containerd):
            if process:
                process.stop()
        self.cleanup()

    def cleanup(self):
        """Kills whatever runs in the node's namespace or cgroups, and removes them."""
        inode = os.stat(self.namespace).st_ino if os.path.exists(self.namespace) else None
        if inode:
            _kill_all(pid for pid in _processes() if pid != os.getpid() and _namespace_inode(pid) == inode)
        _remove_cgroups(self.cgroup_root)
        if os.path.exists(self.namespace):
            subprocess.run(["umount", "--lazy", self.namespace], capture_output=True)
            try:
                os.remove(self.namespace)
            except OSError:
                pass
        subprocess.run(["ip", "link", "delete", self.bridge], capture_output=True)


class Cluster:
    def __init__(self, name, bin_dir, images_dir, log_dir, nodes=("node-a",), state_root="/run/devlet-e2e"):
        self.name = name
        self.bin_dir = bin_dir
        self.images_dir = images_dir
        self.log_dir = os.path.abspath(log_dir)
        self.state_dir = os.path.join(state_root, name)
        self.runc = shutil.which("runc") or "/usr/sbin/runc"
        self.etcd_port = free_port()
        self.etcd_peer_port = free_port()
        self.apiserver_port = free_port()
        self.processes = []
        self.etcd = self.apiserver = self.controller_manager = self.scheduler = None
        self.subnet = zlib.crc32(name.encode()) % 250
        self.link = f"dle-{name}"[:15]
        self.nodes = [Node(self, i + 1, node) for i, node in enumerate(nodes)]
        self.started_at = None
        self.timings = {}

    # --- PKI and kubeconfigs ---

    def pki(self, name):
        return os.path.join(self.state_dir, "pki", name)

    def _certificate(self, name, subject, extensions, days=30):
        key, csr, crt = self.pki(name + ".key"), self.pki(name + ".csr"), self.pki(name + ".crt")
        run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", subject])
        ext = self.pki(name + ".ext")
        with open(ext, "w") as f:
            f.write(extensions)
        run(["openssl", "x509", "-req", "-in", csr, "-CA", self.pki("ca.crt"), "-CAkey", self.pki("ca.key"),
             "-CAcreateserial", "-out", crt, "-days", str(days), "-extfile", ext])

    def make_pki(self):
        os.makedirs(self.pki(""), exist_ok=True)
        run(["openssl", "req", "-x509", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", self.pki("ca.key"),
             "-out", self.pki("ca.crt"), "-days", "30", "-subj", "/CN=devlet-e2e-ca"])
        client = "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"
        self._certificate("apiserver", "/CN=kube-apiserver",
                          "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
                          "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,"
                          "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,"
                          "DNS:kubernetes.default.svc.cluster.local\n")
        self._certificate("admin", "/O=system:masters/CN=admin", client)
        self._certificate("apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client", client)
        self._certificate("controller-manager", "/CN=system:kube-controller-manager", client)
        self._certificate("scheduler", "/CN=system:kube-scheduler", client)
        for node in self.nodes:
            self._certificate(f"kubelet-{node.name}", f"/O=system:nodes/CN=system:node:{node.name}", client)
        run(["openssl", "genrsa", "-out", self.pki("sa.key"), "2048"])
        run(["openssl", "rsa", "-in", self.pki("sa.key"), "-pubout", "-out", self.pki("sa.pub")])

    @property
    def server(self):
        return f"https://127.0.0.1:{self.apiserver_port}"

    def write_kubeconfig(self, path, user, token=None):
        auth = {"token": token} if token else {"client-certificate": self.pki(user + ".crt"),
                                               "client-key": self.pki(user + ".key")}
        with open(path, "w") as f:
            json.dump({
                "apiVersion": "v1", "kind": "Config",
                "clusters": [{"name": "e2e", "cluster": {"server": self.server,
                                                          "certificate-authority": self.pki("ca.crt")}}],
                "users": [{"name": user, "user": auth}],
                "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": user}}],
                "current-context": "e2e",
            }, f, indent=1)
        os.chmod(path, 0o600)
        return path

    @property
    def made_paths_file(self):
        return os.path.join(self.state_dir, "made-on-host")

    def _remove_made_paths(self):
        """The host's mount points this cluster made (empty directories), deepest first."""
        try:
            with open(self.made_paths_file) as f:
                paths = [line.strip() for line in f if line.strip()]
        except OSError:
            return
        for path in sorted(paths, key=len, reverse=True):
            try:
                os.rmdir(path)
            except OSError:
                pass

    @property
    def admin_kubeconfig(self):
        return os.path.join(self.state_dir, "admin.kubeconfig")

    def kubectl(self, *args, check=True, stdin=None, kubeconfig=None):
        result = subprocess.run([os.path.join(self.bin_dir, "kubectl"), "--kubeconfig",
                                 kubeconfig or self.admin_kubeconfig, "--request-timeout=30s",
                                 "--cache-dir", os.path.join(self.state_dir, "kube-cache")] + list(map(str, args)),
                                input=stdin, capture_output=True, text=True)
        if check and result.returncode != 0:
            raise ClusterError(f"kubectl {' '.join(map(str, args))} failed: {result.stdout}{result.stderr}")
        return result

    def ca_context(self):
        """Trusts the cluster's CA; no client certificate."""
        return ssl.create_default_context(cafile=self.pki("ca.crt"))

    def _ssl_context(self):
        context = self.ca_context()
        context.load_cert_chain(self.pki("admin.crt"), self.pki("admin.key"))
        return context

    def get(self, path, timeout=10):
        with urllib.request.urlopen(self.server + path, context=self._ssl_context(), timeout=timeout) as answer:
            return answer.read().decode()

    def get_json(self, path):
        return json.loads(self.get(path))

    # --- start and stop ---

    def _start(self, name, args, log_name):
        process = Process(name, args, os.path.join(self.log_dir, log_name))
        self.processes.append(process)
        return process

    def clean_leftovers(self):
        """What a killed run under this name left: processes, namespaces, cgroups, links, state."""
        for node in self.nodes:
            node.cleanup()
        subprocess.run(["ip", "link", "delete", self.link], capture_output=True)
        ns_dir = os.path.join(self.state_dir, "ns")
        if os.path.isdir(ns_dir):
            for entry in os.listdir(ns_dir):
                path = os.path.join(ns_dir, entry)
                subprocess.run(["umount", "--lazy", path], capture_output=True)
        if os.path.isdir(self.state_dir):
            for pid in _processes():
                try:
                    command = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
                except OSError:
                    continue
                if self.state_dir + "/" in command and pid != os.getpid():
                    _kill_all([pid])
            subprocess.run(["umount", "--lazy", os.path.join(self.state_dir, "ns")], capture_output=True)
            self._remove_made_paths()
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def start(self):
        reason = can_run_cluster()
        if reason:
            raise ClusterError(reason)
        started = time.monotonic()
        self.clean_leftovers()
        os.makedirs(self.log_dir, exist_ok=True)
        os.makedirs(os.path.join(self.state_dir, "ns"), exist_ok=True)
        # Namespace files must live on a private mount to be bound.
        run(["mount", "--bind", os.path.join(self.state_dir, "ns"), os.path.join(self.state_dir, "ns")])
        run(["mount", "--make-private", os.path.join(self.state_dir, "ns")])
        try:
            run(["ip", "link", "add", self.link, "type", "bridge"])
            run(["ip", "link", "set", self.link, "up"])
            for node in self.nodes:
                run(["ip", "address", "add", node.ip + "/32", "dev", self.link])
            self.make_pki()
            self.write_kubeconfig(self.admin_kubeconfig, "admin")
            self._start_control_plane()
            self.timings["control plane"] = time.monotonic() - started
            for node in self.nodes:
                node.make_namespace()
                node.write_configuration()
                node.start_containerd()
                node.start_kubelet()
            for node in self.nodes:
                node.wait_ready()
            self.timings["cluster"] = time.monotonic() - started
        except BaseException:
            self.stop()
            raise

    def _start_control_plane(self):
        b = self.bin_dir
        self.etcd = self._start("etcd", [
            os.path.join(b, "etcd"), "--name", "e2e", "--data-dir", os.path.join(self.state_dir, "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{self.etcd_peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.etcd_peer_port}",
            "--initial-cluster", f"e2e=http://127.0.0.1:{self.etcd_peer_port}",
            # A test's data need not survive a power cut; the API does not change.
            "--unsafe-no-fsync",
        ], "etcd.log")
        self.apiserver_args = [
            os.path.join(b, "kube-apiserver"),
            "--etcd-servers", f"http://127.0.0.1:{self.etcd_port}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", self.apiserver_port,
            "--authorization-mode", "Node,RBAC",
            "--enable-admission-plugins", "NamespaceLifecycle,LimitRanger,ServiceAccount,DefaultTolerationSeconds,"
                                          "Priority,ResourceQuota,NodeRestriction",
            "--client-ca-file", self.pki("ca.crt"),
            "--tls-cert-file", self.pki("apiserver.crt"), "--tls-private-key-file", self.pki("apiserver.key"),
            "--kubelet-client-certificate", self.pki("apiserver-kubelet-client.crt"),
            "--kubelet-client-key", self.pki("apiserver-kubelet-client.key"),
            "--service-account-key-file", self.pki("sa.pub"),
            "--service-account-signing-key-file", self.pki("sa.key"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-cluster-ip-range", "10.0.0.0/24",
            # Node names are not in any DNS: logs and exec go to the node's address.
            "--kubelet-preferred-address-types", "InternalIP",
            "--allow-privileged=true",
            "--feature-gates", FEATURE_GATES,
            "--v", "1",
        ]
        self.apiserver = self._start("kube-apiserver", self.apiserver_args, "kube-apiserver.log")
        self._wait_apiserver()
        cm_kubeconfig = self.write_kubeconfig(os.path.join(self.state_dir, "controller-manager.kubeconfig"),
                                              "controller-manager")
        self.controller_manager = self._start("kube-controller-manager", [
            os.path.join(b, "kube-controller-manager"),
            "--kubeconfig", cm_kubeconfig,
            "--authentication-kubeconfig", cm_kubeconfig, "--authorization-kubeconfig", cm_kubeconfig,
            "--service-account-private-key-file", self.pki("sa.key"),
            "--root-ca-file", self.pki("ca.crt"),
            "--cluster-signing-cert-file", self.pki("ca.crt"), "--cluster-signing-key-file", self.pki("ca.key"),
            "--use-service-account-credentials",
            "--leader-elect=false",
            "--bind-address", "127.0.0.1", "--secure-port", free_port(),
            "--feature-gates", FEATURE_GATES,
        ], "kube-controller-manager.log")
        scheduler_kubeconfig = self.write_kubeconfig(os.path.join(self.state_dir, "scheduler.kubeconfig"),
                                                     "scheduler")
        self.scheduler = self._start("kube-scheduler", [
            os.path.join(b, "kube-scheduler"),
            "--kubeconfig", scheduler_kubeconfig,
            "--authentication-kubeconfig", scheduler_kubeconfig, "--authorization-kubeconfig", scheduler_kubeconfig,
            "--leader-elect=false",
            "--bind-address", "127.0.0.1", "--secure-port", free_port(),
            "--feature-gates", FEATURE_GATES,
        ], "kube-scheduler.log")
        # The default ServiceAccount of `default` is made by the controller manager.
        wait_for("the default ServiceAccount", lambda: self.controller_manager.check_alive() or self.kubectl(
            "get", "serviceaccount", "default", "-n", "default", check=False).returncode == 0, 120,
            on_timeout=lambda: f"\nkube-controller-manager log ends:\n{log_tail(self.controller_manager.log_path)}")

    def _wait_apiserver(self):
        def healthy():
            self.etcd.check_alive()
            self.apiserver.check_alive()
            return self.get("/readyz", timeout=5).strip() == "ok"
        wait_for("kube-apiserver /readyz", healthy, 120,
                 on_timeout=lambda: f"\nkube-apiserver log ends:\n{log_tail(self.apiserver.log_path)}")

    def stop_apiserver(self):
        """Stops the API server (SIGTERM, as a stopped service is); etcd keeps the state."""
        self.apiserver.stop()
        self.processes.remove(self.apiserver)

    def start_apiserver(self):
        """Starts the API server again on the same port and storage; returns once it is ready."""
        self.apiserver = self._start("kube-apiserver", self.apiserver_args, "kube-apiserver.log")
        self._wait_apiserver()

    def restart_apiserver(self):
        self.stop_apiserver()
        self.start_apiserver()

    def stop(self):
        for node in self.nodes:
            node.stop()
        for process in reversed(self.processes):
            process.stop()
        self.processes = []
        subprocess.run(["ip", "link", "delete", self.link], capture_output=True)
        subprocess.run(["umount", "--lazy", os.path.join(self.state_dir, "ns")], capture_output=True)
        self._remove_made_paths()
        shutil.rmtree(self.state_dir, ignore_errors=True)
        try:
            os.rmdir(os.path.dirname(self.state_dir))
        except OSError:
            pass


def test_main():
    """A test file's main: exits 77 with the reason where no cluster can run, else runs its
    unittest cases."""
    reason = can_run_cluster()
    if reason:
        print(f"SKIP: {reason}")
        sys.exit(77)
    # urllib's TLS sockets closed by the collector are not the tests' concern.
    warnings.simplefilter("ignore", ResourceWarning)
    unittest.main(module="__main__", verbosity=2, warnings="ignore")


def stop_or_keep(cluster):
    """Stops the cluster, or with DEVLET_E2E_KEEP=1 leaves it running for debugging and says
    how to reach it and how to remove it."""
    if os.environ.get("DEVLET_E2E_KEEP") != "1":
        cluster.stop()
        return
    print(f"\nDEVLET_E2E_KEEP=1: cluster {cluster.name} left running.\n"
          f"  kubectl: {os.path.join(cluster.bin_dir, 'kubectl')} --kubeconfig {cluster.admin_kubeconfig}\n"
          f"  a node's view: nsenter --mount={cluster.state_dir}/ns/<node> -- sh\n"
          f"  logs: {cluster.log_dir}\n"
          f"  remove it: python3 {os.path.abspath(__file__)} clean {cluster.name} "
          + " ".join(node.name for node in cluster.nodes), file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "clean":
        Cluster(sys.argv[2], "", "", "/tmp", nodes=sys.argv[3:] or ["node-a"]).clean_leftovers()
    else:
        sys.exit(f"usage: {sys.argv[0]} clean NAME [NODE...]: removes what a kept or killed cluster left")
