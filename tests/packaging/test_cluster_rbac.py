"""The packaged RBAC manifest (packaging/cluster/rbac.yaml) is valid Kubernetes YAML and
its Role and ClusterRole grant exactly what devlet calls on the API: the verbs below, which
this test also finds in the source (every ApiClient call and Informer outside the client
itself, and the read of the node's Node), so that a new call without its rule fails here."""

import os
import re
import sys
import unittest

try:
    import yaml
except ImportError:
    print("python3-yaml is missing (scripts/install-deps installs it)")
    sys.exit(77)

SOURCE = os.environ.get("DEVLET_SOURCE_ROOT", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MANIFEST = os.path.join(SOURCE, "packaging", "cluster", "rbac.yaml")

# What devlet calls in its namespace, by (API group, resource): slot_leases.cpp's Lease
# calls and brokers.cpp's (server-side apply: patch, and create for a new object).
BROKER_VERBS = {"list", "watch", "create", "patch", "delete"}
CALLED = {("coordination.k8s.io", "leases"): {"get", "list", "watch", "create", "update", "delete"},
          ("", "pods"): BROKER_VERBS, ("", "services"): BROKER_VERBS, ("batch", "jobs"): BROKER_VERBS}
# And its own token's renewal (token_renewal.cpp's TokenRequest), for its own ServiceAccount
# only: the one rule with resourceNames.
TOKEN_RULE = {"apiGroups": [""], "resources": ["serviceaccounts/token"], "resourceNames": ["devlet-node"],
              "verbs": ["create"]}
# And outside it: brokers.cpp's `get` of the node's Node, the broker Pods' owner. Nodes have
# no namespace, so this needs the ClusterRole.
CLUSTER_CALLED = {("", "nodes"): {"get"}}
NAMESPACE = "devlet"
ACCOUNT = "devlet-node"

# ApiClient's methods and Informer, by the RBAC verb each needs.
VERB_OF_CALL = {"get": "get", "list": "list", "create": "create", "replace": "update", "mergePatch": "patch",
                "apply": "patch", "remove": "delete"}


def sources():
    """The daemon's code that calls the API (cluster/ and daemon/), but the client itself."""
    for folder in ("cluster", "daemon"):
        for name in sorted(os.listdir(os.path.join(SOURCE, folder))):
            if name.endswith(".cpp") and name != "api_client.cpp":
                with open(os.path.join(SOURCE, folder, name)) as f:
                    yield f.read()


def cluster_scoped_calls_in_source():
    """(group, resource) -> verbs of calls on cluster-scoped objects: paths of the core
    group without a namespace, as "/api/v1/nodes/"."""
    calls = {}
    for text in sources():
        for method, resource in re.findall(r"\b\w*[cC]lient\w*(?:\.|->)(\w+)\(\s*\"/api/v1/(\w+)", text):
            if resource != "namespaces" and method in VERB_OF_CALL:
                calls.setdefault(("", resource), set()).add(VERB_OF_CALL[method])
    return calls


def calls_in_source():
    """RBAC verbs of the API calls the daemon's code makes (cluster/ and daemon/)."""
    verbs = set()
    for text in sources():
        for method in re.findall(r"\b\w*[cC]lient\w*(?:\.|->)(\w+)\(", text):
            if method in VERB_OF_CALL:
                verbs.add(VERB_OF_CALL[method])
        if re.search(r"\bInformer>\(|\bInformer\(", text):
            verbs |= {"list", "watch"}
    return verbs


class RbacManifest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(MANIFEST) as f:
            cls.documents = [d for d in yaml.safe_load_all(f) if d is not None]
        cls.by_kind = {}
        for d in cls.documents:
            cls.by_kind.setdefault(d["kind"], []).append(d)

    def test_every_document_is_a_kubernetes_object(self):
        for d in self.documents:
            self.assertIn("apiVersion", d)
            self.assertIn("kind", d)
            self.assertRegex(d["metadata"]["name"], r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
        self.assertEqual(sorted(self.by_kind), ["ClusterRole", "ClusterRoleBinding", "Namespace", "Role",
                                                "RoleBinding", "ServiceAccount"])

    def test_every_field_is_one_the_kind_has(self):
        # A misspelt field ("verb", "subject") is dropped by the API server without a word.
        top = {"Namespace": {"apiVersion", "kind", "metadata"}, "ServiceAccount": {"apiVersion", "kind", "metadata"},
               "Role": {"apiVersion", "kind", "metadata", "rules"},
               "RoleBinding": {"apiVersion", "kind", "metadata", "roleRef", "subjects"},
               "ClusterRole": {"apiVersion", "kind", "metadata", "rules"},
               "ClusterRoleBinding": {"apiVersion", "kind", "metadata", "roleRef", "subjects"}}
        rbac = "rbac.authorization.k8s.io/v1"
        versions = {"Namespace": "v1", "ServiceAccount": "v1", "Role": rbac, "RoleBinding": rbac,
                    "ClusterRole": rbac, "ClusterRoleBinding": rbac}
        for d in self.documents:
            kind = d["kind"]
            self.assertEqual(d["apiVersion"], versions[kind], kind)
            self.assertLessEqual(set(d), top[kind], kind)
            self.assertLessEqual(set(d["metadata"]), {"name", "namespace", "labels", "annotations"}, kind)
            for rule in d.get("rules", []):
                self.assertLessEqual(set(rule), {"apiGroups", "resources", "verbs", "resourceNames",
                                                 "nonResourceURLs"})
            for subject in d.get("subjects", []):
                self.assertLessEqual(set(subject), {"kind", "name", "namespace", "apiGroup"})

    def test_only_the_node_read_is_cluster_wide(self):
        for d in self.documents:
            if d["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding"):
                self.assertNotIn("namespace", d["metadata"], d["kind"])
            else:
                self.assertEqual(d["metadata"].get("namespace"), NAMESPACE, d["kind"])
        (cluster_role,) = self.by_kind["ClusterRole"]
        self.assertEqual(self.granted(cluster_role), CLUSTER_CALLED)

    @staticmethod
    def granted(role):
        """(group, resource) -> verbs a Role or ClusterRole grants; no wildcards or names but
        the token rule's."""
        granted = {}
        for rule in role["rules"]:
            if rule == TOKEN_RULE:
                continue
            assert "resourceNames" not in rule, rule
            assert "nonResourceURLs" not in rule, rule
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    assert "*" not in (group, resource) and "*" not in rule["verbs"], rule
                    granted.setdefault((group, resource), set()).update(rule["verbs"])
        return granted

    def test_the_role_grants_exactly_what_devlet_calls(self):
        (role,) = self.by_kind["Role"]
        self.assertEqual(role["apiVersion"], "rbac.authorization.k8s.io/v1")
        self.assertEqual(self.granted(role), CALLED)

    def test_the_token_may_be_renewed_for_the_own_service_account_only(self):
        (role,) = self.by_kind["Role"]
        self.assertIn(TOKEN_RULE, role["rules"])
        with open(os.path.join(SOURCE, "cluster", "token_renewal.cpp")) as f:
            source = f.read()
        self.assertIn('"/serviceaccounts/"', source)
        self.assertIn('"/token"', source)
        self.assertIn("sender_.create(", source)

    def test_the_list_above_is_what_the_source_calls(self):
        called = set().union(*CALLED.values(), *CLUSTER_CALLED.values())
        self.assertEqual(calls_in_source(), called)
        self.assertEqual(cluster_scoped_calls_in_source(), CLUSTER_CALLED)

    def test_the_binding_gives_the_role_to_the_service_account(self):
        (binding,) = self.by_kind["RoleBinding"]
        (role,) = self.by_kind["Role"]
        (account,) = self.by_kind["ServiceAccount"]
        (namespace,) = self.by_kind["Namespace"]
        self.assertEqual(namespace["metadata"]["name"], NAMESPACE)
        self.assertEqual(account["metadata"]["name"], ACCOUNT)
        self.assertEqual(binding["roleRef"],
                         {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]})
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}])

    def test_the_cluster_binding_gives_the_cluster_role_to_the_service_account(self):
        (binding,) = self.by_kind["ClusterRoleBinding"]
        (role,) = self.by_kind["ClusterRole"]
        self.assertEqual(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                              "name": role["metadata"]["name"]})
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": NAMESPACE}])


if __name__ == "__main__":
    unittest.main(verbosity=2)
