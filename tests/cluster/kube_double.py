"""The Kubernetes API double as a child process for Python test programs.

Makes a test PKI (make-test-pki.sh), a tokens file, starts kube-api-double on a free
loopback port and writes kubeconfigs for it. Paths come from the environment meson sets:
KUBE_API_DOUBLE (the binary), KUBE_TEST_PKI and KUBE_WRITE_KUBECONFIG (the scripts).
"""

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

SKIP = 77

ADMIN_TOKEN = "admin-token"
LIMITED_TOKEN = "limited-token"  # may not touch secrets
DEFAULT_TOKENS = f"{ADMIN_TOKEN} admin\n{LIMITED_TOKEN} limited deny=secrets\n"


def skip(reason):
    print(f"SKIP: {reason}")
    sys.exit(SKIP)


def debian_kubectl():
    """The kubectl the Debian package kubernetes-client installs (another package may own
    /usr/bin/kubectl and divert it), or None."""
    if os.environ.get("KUBECTL"):
        return os.environ["KUBECTL"]
    try:
        files = subprocess.run(["dpkg-query", "-L", "kubernetes-client"], capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    for f in files:
        if f.endswith("/bin/kubectl"):
            # dpkg-divert --truename: where dpkg put the package's file when it is diverted.
            true = subprocess.run(["dpkg-divert", "--truename", f], capture_output=True, text=True).stdout.strip()
            for candidate in (true, f):
                if candidate and os.access(candidate, os.X_OK):
                    version = subprocess.run([candidate, "version", "--client", "--short"], capture_output=True,
                                             text=True).stdout
                    if "v1.20" in version:
                        return candidate
    return None


class KubeApiDouble:
    def __init__(self, tokens=DEFAULT_TOKENS, extra_args=(), client_certificates=False):
        self.binary = os.environ.get("KUBE_API_DOUBLE")
        self.pki_script = os.environ.get("KUBE_TEST_PKI")
        self.kubeconfig_script = os.environ.get("KUBE_WRITE_KUBECONFIG")
        if not (self.binary and self.pki_script and self.kubeconfig_script):
            raise RuntimeError("KUBE_API_DOUBLE, KUBE_TEST_PKI and KUBE_WRITE_KUBECONFIG must be set (meson does)")
        self.dir = tempfile.mkdtemp(prefix="kube-double-")
        subprocess.run([self.pki_script, os.path.join(self.dir, "pki")], check=True)
        self.ca = os.path.join(self.dir, "pki", "ca.pem")
        self.tokens = os.path.join(self.dir, "tokens")
        with open(self.tokens, "w") as f:
            f.write(tokens)
        self.extra_args = list(extra_args)
        if client_certificates:
            self.extra_args += ["--client-ca", self.ca]
        self.process = None
        self.port = None
        self.start()

    def start(self, port=0):
        port_file = os.path.join(self.dir, "port")
        if os.path.exists(port_file):
            os.unlink(port_file)
        self.log = open(os.path.join(self.dir, "double.log"), "ab")
        pki = os.path.join(self.dir, "pki")
        self.process = subprocess.Popen(
            [self.binary, "--cert", os.path.join(pki, "server.pem"), "--key", os.path.join(pki, "server.key"),
             "--token-file", self.tokens, "--port-file", port_file, "--listen", f"127.0.0.1:{port}"]
            + self.extra_args, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 30
        while not os.path.exists(port_file):
            if self.process.poll() is not None:
                raise RuntimeError("kube-api-double exited: " + self.log_text())
            if time.monotonic() > deadline:
                raise RuntimeError("kube-api-double did not write its port file")
            time.sleep(0.02)
        with open(port_file) as f:
            self.port = int(f.read().strip())
        self.url = f"https://127.0.0.1:{self.port}"

    def log_text(self):
        with open(os.path.join(self.dir, "double.log"), errors="replace") as f:
            return f.read()

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(timeout=30)
        self.process = None

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def kubeconfig(self, token=ADMIN_TOKEN, name="kubeconfig", namespace="default"):
        path = os.path.join(self.dir, name)
        subprocess.run([self.kubeconfig_script, path, self.url, self.ca, "token", token, namespace], check=True)
        return path

    def cert_kubeconfig(self, name="cert.kubeconfig", namespace="default"):
        """A kubeconfig with the test client certificate (CN devlet-test) instead of a token."""
        path = os.path.join(self.dir, name)
        pki = os.path.join(self.dir, "pki")
        subprocess.run([self.kubeconfig_script, path, self.url, self.ca, "cert", os.path.join(pki, "client.pem"),
                        os.path.join(pki, "client.key"), namespace], check=True)
        return path

    def request(self, method, path, body=None, token=ADMIN_TOKEN, content_type="application/json"):
        """(HTTP status, decoded JSON body) of one request to the double."""
        context = ssl.create_default_context(cafile=self.ca)
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=context, timeout=30) as resp:
                return resp.status, json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def control(self, method, what, body=None):
        status, answer = self.request(method, "/_double/" + what, body)
        if status != 200:
            raise RuntimeError(f"control {what}: {status} {answer}")
        return answer
