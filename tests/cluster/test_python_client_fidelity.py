"""Python's Kubernetes client (Debian's python3-kubernetes) against the Kubernetes API
double: lists with selectors, watches that see another client's changes, bookmarks, 410 on
an expired resourceVersion, 409 on a stale replace, and 401/403/429 as the client reports them."""

import os
import queue
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kube_double  # noqa: E402

try:
    import kubernetes
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException
except ImportError:
    kubernetes = None

NS = "devlet"


def lease(name, holder, labels=None):
    return client.V1Lease(metadata=client.V1ObjectMeta(name=name, labels=labels or {}),
                          spec=client.V1LeaseSpec(holder_identity=holder, lease_duration_seconds=15))


class PythonClientAgainstDouble(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.double = kube_double.KubeApiDouble(extra_args=["--bookmark-interval", "1"])
        cls.watcher_api = cls.client_for(kube_double.ADMIN_TOKEN)
        cls.writer_api = cls.client_for(kube_double.ADMIN_TOKEN)  # another client, its own connections
        client.CoreV1Api(cls.writer_api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=NS)))

    @classmethod
    def tearDownClass(cls):
        cls.double.close()

    @classmethod
    def client_for(cls, token):
        path = cls.double.kubeconfig(token, f"kubeconfig-{token}", NS)
        return config.new_client_from_config(config_file=path)

    def leases(self, api_client):
        return client.CoordinationV1Api(api_client)

    def watch_in_thread(self, func, events, stop_after, **kwargs):
        w = watch.Watch()

        def run():
            try:
                for event in w.stream(func, **kwargs):
                    events.put(event)
                    if event["type"] == stop_after:
                        w.stop()
            except Exception as e:  # handed to the test thread
                events.put(e)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def next_event(self, events, skip_bookmarks=True):
        while True:
            event = events.get(timeout=30)
            if isinstance(event, Exception):
                raise event
            if skip_bookmarks and event["type"] == "BOOKMARK":
                continue
            return event

    def test_list_with_label_and_field_selectors(self):
        core = client.CoreV1Api(self.writer_api)
        for name, node in [("py-a", "node-1"), ("py-b", "node-2")]:
            core.create_namespaced_pod(NS, client.V1Pod(
                metadata=client.V1ObjectMeta(name=name, labels={"suite": "python"}),
                spec=client.V1PodSpec(node_name=node, containers=[client.V1Container(name="c", image="busybox")])))
        listed = client.CoreV1Api(self.watcher_api).list_namespaced_pod(NS, label_selector="suite=python",
                                                                       field_selector="spec.nodeName=node-2")
        self.assertEqual([p.metadata.name for p in listed.items], ["py-b"])
        self.assertTrue(listed.metadata.resource_version)
        everywhere = client.CoreV1Api(self.watcher_api).list_pod_for_all_namespaces(label_selector="suite=python")
        self.assertEqual(sorted(p.metadata.name for p in everywhere.items), ["py-a", "py-b"])

    def test_watch_sees_another_clients_changes(self):
        listed = self.leases(self.watcher_api).list_namespaced_lease(NS, label_selector="watched=yes")
        events = queue.Queue()
        self.watch_in_thread(self.leases(self.watcher_api).list_namespaced_lease, events, "DELETED", namespace=NS,
                             label_selector="watched=yes", resource_version=listed.metadata.resource_version,
                             timeout_seconds=60)
        writer = self.leases(self.writer_api)
        writer.create_namespaced_lease(NS, lease("watched", "node-a", {"watched": "yes"}))
        writer.patch_namespaced_lease("watched", NS, {"spec": {"holderIdentity": "node-b"}})
        writer.delete_namespaced_lease("watched", NS)
        seen = [self.next_event(events) for _ in range(3)]
        self.assertEqual([e["type"] for e in seen], ["ADDED", "MODIFIED", "DELETED"])
        self.assertEqual(seen[1]["object"].spec.holder_identity, "node-b")
        versions = [e["object"].metadata.resource_version for e in seen]
        self.assertEqual(len(set(versions)), 3)

    def test_watch_from_an_old_version_replays_history(self):
        writer = self.leases(self.writer_api)
        created = writer.create_namespaced_lease(NS, lease("replayed", "node-a", {"replay": "yes"}))
        writer.patch_namespaced_lease("replayed", NS, {"spec": {"holderIdentity": "node-b"}})
        events = queue.Queue()
        self.watch_in_thread(self.leases(self.watcher_api).list_namespaced_lease, events, "MODIFIED", namespace=NS,
                             label_selector="replay=yes", resource_version=created.metadata.resource_version,
                             timeout_seconds=60)
        event = self.next_event(events)
        self.assertEqual(event["type"], "MODIFIED")
        self.assertEqual(event["object"].spec.holder_identity, "node-b")

    def test_bookmarks_arrive_when_asked_for(self):
        listed = self.leases(self.watcher_api).list_namespaced_lease(NS)
        events = queue.Queue()
        self.watch_in_thread(self.leases(self.watcher_api).list_namespaced_lease, events, "BOOKMARK", namespace=NS,
                             resource_version=listed.metadata.resource_version, allow_watch_bookmarks=True,
                             timeout_seconds=60)
        event = self.next_event(events, skip_bookmarks=False)
        self.assertEqual(event["type"], "BOOKMARK")
        self.assertTrue(event["raw_object"]["metadata"]["resourceVersion"])

    def test_expired_resource_version_is_410(self):
        writer = self.leases(self.writer_api)
        old = writer.create_namespaced_lease(NS, lease("expiring", "node-a")).metadata.resource_version
        writer.patch_namespaced_lease("expiring", NS, {"spec": {"holderIdentity": "node-b"}})
        self.double.control("POST", "compact")
        with self.assertRaises(ApiException) as raised:
            for _ in watch.Watch().stream(self.leases(self.watcher_api).list_namespaced_lease, namespace=NS,
                                          resource_version=old, timeout_seconds=30):
                pass
        self.assertEqual(raised.exception.status, 410)
        # A relist gives a version the watch accepts.
        fresh = self.leases(self.watcher_api).list_namespaced_lease(NS).metadata.resource_version
        events = queue.Queue()
        self.watch_in_thread(self.leases(self.watcher_api).list_namespaced_lease, events, "ADDED", namespace=NS,
                             resource_version=fresh, timeout_seconds=60)
        writer.create_namespaced_lease(NS, lease("after-relist", "node-a"))
        self.assertEqual(self.next_event(events)["object"].metadata.name, "after-relist")

    def test_running_watch_gets_an_error_event_when_expired(self):
        listed = self.leases(self.watcher_api).list_namespaced_lease(NS)
        events = queue.Queue()
        self.watch_in_thread(self.leases(self.watcher_api).list_namespaced_lease, events, "never", namespace=NS,
                             resource_version=listed.metadata.resource_version, timeout_seconds=60)
        self.leases(self.writer_api).create_namespaced_lease(NS, lease("before-expiry", "node-a"))
        self.assertEqual(self.next_event(events)["type"], "ADDED")
        self.double.control("POST", "compact", {"expireWatches": True})
        with self.assertRaises(ApiException) as raised:
            self.next_event(events)
        self.assertEqual(raised.exception.status, 410)

    def test_stale_replace_is_409_conflict(self):
        api = self.leases(self.writer_api)
        api.create_namespaced_lease(NS, lease("optimistic", "node-a"))
        mine = self.leases(self.watcher_api).read_namespaced_lease("optimistic", NS)
        theirs = api.read_namespaced_lease("optimistic", NS)
        theirs.spec.holder_identity = "node-b"
        api.replace_namespaced_lease("optimistic", NS, theirs)
        mine.spec.holder_identity = "node-c"
        with self.assertRaises(ApiException) as raised:
            self.leases(self.watcher_api).replace_namespaced_lease("optimistic", NS, mine)
        self.assertEqual(raised.exception.status, 409)
        self.assertIn('"reason":"Conflict"', raised.exception.body)
        self.assertEqual(api.read_namespaced_lease("optimistic", NS).spec.holder_identity, "node-b")

    def test_delete_precondition_mismatch_is_409(self):
        api = self.leases(self.writer_api)
        created = api.create_namespaced_lease(NS, lease("precondition", "node-a"))
        api.patch_namespaced_lease("precondition", NS, {"spec": {"holderIdentity": "node-b"}})
        stale = client.V1DeleteOptions(preconditions=client.V1Preconditions(
            resource_version=created.metadata.resource_version))
        with self.assertRaises(ApiException) as raised:
            api.delete_namespaced_lease("precondition", NS, body=stale)
        self.assertEqual(raised.exception.status, 409)
        current = api.read_namespaced_lease("precondition", NS).metadata.resource_version
        api.delete_namespaced_lease("precondition", NS, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version=current)))

    def test_missing_is_404_and_duplicate_is_409(self):
        api = self.leases(self.writer_api)
        with self.assertRaises(ApiException) as missing:
            api.read_namespaced_lease("nobody", NS)
        self.assertEqual(missing.exception.status, 404)
        api.create_namespaced_lease(NS, lease("duplicate", "node-a"))
        with self.assertRaises(ApiException) as duplicate:
            api.create_namespaced_lease(NS, lease("duplicate", "node-a"))
        self.assertEqual(duplicate.exception.status, 409)
        self.assertIn("AlreadyExists", duplicate.exception.body)

    def test_token_request_for_a_service_account(self):
        core = client.CoreV1Api(self.writer_api)
        core.create_namespaced_service_account(NS, client.V1ServiceAccount(
            metadata=client.V1ObjectMeta(name="devlet-node")))
        request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
            audiences=["https://kubernetes.default.svc.cluster.local"], expiration_seconds=3600))
        answer = core.create_namespaced_service_account_token("devlet-node", NS, request)
        self.assertTrue(answer.status.token)
        self.assertEqual(answer.spec.expiration_seconds, 3600)
        left = answer.status.expiration_timestamp.timestamp() - time.time()
        self.assertTrue(3500 < left <= 3601, left)
        # The new token is a credential of its own.
        path = self.double.kubeconfig(answer.status.token, "kubeconfig-issued", NS)
        self.leases(config.new_client_from_config(config_file=path)).list_namespaced_lease(NS)

    def test_invalid_lease_is_422(self):
        bad = lease("bad-duration", "node-a")
        bad.spec.lease_duration_seconds = 0
        with self.assertRaises(ApiException) as raised:
            self.leases(self.writer_api).create_namespaced_lease(NS, bad)
        self.assertEqual(raised.exception.status, 422)

    def test_unauthorized_forbidden_and_throttled(self):
        with self.assertRaises(ApiException) as unauthorized:
            self.leases(self.client_for("wrong-token")).list_namespaced_lease(NS)
        self.assertEqual(unauthorized.exception.status, 401)
        limited = client.CoreV1Api(self.client_for(kube_double.LIMITED_TOKEN))
        with self.assertRaises(ApiException) as forbidden:
            limited.list_namespaced_secret(NS)
        self.assertEqual(forbidden.exception.status, 403)
        limited.list_namespaced_pod(NS)
        # urllib3 under the client retries a 429 after its Retry-After: the double answers the
        # first try 429, the retry 200.
        self.double.control("POST", "fail", {"count": 1, "code": 429, "retryAfter": 1, "resource": "leases"})
        self.leases(self.writer_api).list_namespaced_lease(NS)
        recent = [e for e in self.double.control("GET", "requests")["recent"] if e["key"] == "list leases"]
        self.assertEqual([e["code"] for e in recent[-2:]], [429, 200])
        self.double.control("POST", "fail", {"count": 5, "code": 503, "resource": "leases"})
        with self.assertRaises(ApiException) as unavailable:
            self.leases(self.writer_api).list_namespaced_lease(NS)
        self.assertEqual(unavailable.exception.status, 503)
        self.double.control("POST", "fail", {"count": 0})


if __name__ == "__main__":
    if kubernetes is None:
        kube_double.skip("Python's kubernetes client (package python3-kubernetes) is not installed for "
                         + sys.executable)
    unittest.main(verbosity=2)
