"""packaging/cluster/node-kubeconfig against the Kubernetes API double with Debian's kubectl:
it reads the server and the CA from an administrator's kubeconfig (kubectl config view),
writes a 0600 kubeconfig that works (kubectl, with the node's token, may use Leases in the
namespace and nothing else), and never prints the token. The double has no TokenRequest
(ServiceAccount tokens), and Debian's kubectl 1.20 has no "kubectl create token": the
token comes from --token-file here, and the test checks that a failing "create token"
leaves no file and says why."""

import base64
import os
import stat
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cluster"))
import kube_double  # noqa: E402

try:
    import yaml
except ImportError:
    kube_double.skip("python3-yaml is missing (scripts/install-deps installs it)")

SOURCE = os.environ.get("DEVLET_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPT = os.path.join(SOURCE, "packaging", "cluster", "node-kubeconfig")
KUBECTL = kube_double.debian_kubectl()
NODE_TOKEN = "node-token-5c1b2e7d9a"
TOKENS = (f"{kube_double.ADMIN_TOKEN} admin\n"
          f"{NODE_TOKEN} system:serviceaccount:devlet:devlet-node allow=leases:get,list,watch,create,update,delete\n")


class NodeKubeconfig(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.double = kube_double.KubeApiDouble(tokens=TOKENS, extra_args=["--namespace", "devlet"])
        # The CA by file name, as k3s and most kubeconfigs have it: --flatten embeds it.
        cls.admin = cls.double.kubeconfig(kube_double.ADMIN_TOKEN, "admin.kubeconfig", "default")
        cls.kubectl_command = f"{KUBECTL} --kubeconfig {cls.admin}"
        cls.token_file = os.path.join(cls.double.dir, "node.token")
        with open(cls.token_file, "w") as f:
            f.write(NODE_TOKEN + "\n")

    @classmethod
    def tearDownClass(cls):
        cls.double.close()

    def run_script(self, *args):
        return subprocess.run([SCRIPT, "--kubectl", self.kubectl_command, *args], capture_output=True, text=True)

    def kubectl(self, kubeconfig, *args):
        return subprocess.run([KUBECTL, "--kubeconfig", kubeconfig, "--request-timeout=30s",
                               "--cache-dir", os.path.join(self.double.dir, "kube-cache"), *args],
                              capture_output=True, text=True)

    def test_writes_a_private_kubeconfig_that_reaches_the_leases_and_nothing_else(self):
        out = os.path.join(self.double.dir, "node-a.kubeconfig")
        result = self.run_script("--token-file", self.token_file, out)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn(NODE_TOKEN, result.stdout + result.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(out).st_mode), 0o600)
        with open(out) as f:
            config = yaml.safe_load(f)
        cluster = config["clusters"][0]["cluster"]
        self.assertEqual(cluster["server"], self.double.url)
        with open(self.double.ca, "rb") as f:
            self.assertEqual(base64.b64decode(cluster["certificate-authority-data"]), f.read())
        self.assertEqual(config["users"][0]["user"], {"token": NODE_TOKEN})
        self.assertEqual(config["contexts"][0]["context"]["namespace"], "devlet")

        leases = self.kubectl(out, "get", "leases", "-n", "devlet", "-o", "name")
        self.assertEqual(leases.returncode, 0, leases.stderr)
        pods = self.kubectl(out, "get", "pods", "-n", "devlet")
        self.assertNotEqual(pods.returncode, 0)
        self.assertIn("forbidden", pods.stderr.lower())

    def test_server_and_ca_can_be_given(self):
        out = os.path.join(self.double.dir, "given.kubeconfig")
        server = f"https://localhost:{self.double.port}"
        result = subprocess.run([SCRIPT, "--kubectl", "false", "--server", server, "--ca-file", self.double.ca,
                                 "--token-file", self.token_file, out], capture_output=True, text=True)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(out) as f:
            config = yaml.safe_load(f)
        self.assertEqual(config["clusters"][0]["cluster"]["server"], server)
        self.assertEqual(self.kubectl(out, "get", "leases", "-n", "devlet").returncode, 0)

    def test_a_token_kubectl_cannot_make_leaves_no_file(self):
        out = os.path.join(self.double.dir, "none.kubeconfig")
        result = self.run_script(out)
        self.assertEqual(result.returncode, 1)
        self.assertIn("could not make a token for ServiceAccount devlet/devlet-node", result.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([n for n in os.listdir(self.double.dir) if n.startswith("none.kubeconfig")], [])

    def test_bad_input_is_refused_with_a_message(self):
        out = os.path.join(self.double.dir, "bad.kubeconfig")
        odd_token = os.path.join(self.double.dir, "odd.token")
        with open(odd_token, "w") as f:
            f.write("secret'value\n")
        cases = [
            (["--server", "http://10.0.0.1:6443", "--token-file", self.token_file, out], 1, "must be https://"),
            (["--token-file", os.path.join(self.double.dir, "missing"), out], 1, "cannot read the token file"),
            (["--namespace", "Dev let", "--token-file", self.token_file, out], 1, "is not a Kubernetes name"),
            (["--server", "https://10.0.0.1:6443 # x", "--token-file", self.token_file, out], 1,
             "holds spaces, quotes or '#'"),
            (["--frobnicate", out], 2, "unknown option --frobnicate"),
            ([], 2, "usage:"),
            (["--token-file", odd_token, out], 1, "characters a bearer token cannot hold"),
        ]
        for args, code, message in cases:
            result = self.run_script(*args)
            self.assertEqual(result.returncode, code, args)
            self.assertIn(message, result.stderr, args)
            self.assertNotIn("secret", result.stdout + result.stderr, args)
            self.assertFalse(os.path.exists(out), args)


if __name__ == "__main__":
    if KUBECTL is None:
        kube_double.skip("Debian's kubectl (kubernetes-client) is not installed")
    unittest.main(verbosity=2)
