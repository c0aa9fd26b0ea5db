#include "status/status_page.h"

namespace devlet::status {

namespace {

// Everything the page shows comes from /api/v1/status (live from /api/v1/status/stream,
// or polled where the stream is refused or breaks) and is put into the document as text
// (textContent), never as markup: device properties are whatever a device says.
constexpr std::string_view kPage = R"devlet(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>devlet</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #1d1d1f; background: #fafafa; }
h1 { font-size: 1.3em; margin: 0 0 .2em; }
h2 { font-size: 1.1em; margin: 1.6em 0 .3em; }
#summary { font-size: 1.15em; margin: .3em 0; }
.meta, .muted { color: #666; }
table { border-collapse: collapse; margin: .4em 0; min-width: 60%; background: #fff; }
th, td { border: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
.healthy { color: #176f2c; font-weight: 600; }
.unhealthy { color: #a15c00; font-weight: 600; }
.withdrawn, .error { color: #b3261e; font-weight: 600; }
.problem { color: #8a4b00; }
.problems { margin: .2em 0 .4em; padding-left: 1.2em; }
.slot { display: block; white-space: nowrap; }
.props { font-size: .9em; color: #444; }
.excluded { margin: .2em 0 .4em; padding-left: 1.2em; color: #555; }
.state { display: block; font-weight: normal; color: #444; }
#stale { display: none; background: #fde7e7; border: 1px solid #b3261e; padding: .4em .8em; margin: .5em 0; }
code { font-size: .95em; }
</style>
</head>
<body>
<h1>devlet on <span id="node">…</span></h1>
<p id="summary">Loading…</p>
<p class="meta"><span id="kubelet"></span> · <span id="ready"></span> · updated <span id="updated">never</span> <span id="live"></span></p>
<div id="stale"></div>
<noscript><p>This page needs JavaScript; the same facts are at <a href="/api/v1/status">/api/v1/status</a>.</p></noscript>
<ul id="errors" class="problems"></ul>
<div id="configurations"></div>
<h2>Recent events</h2>
<table id="events"><thead><tr><th>time</th><th>level</th><th>subject</th><th>message</th></tr></thead><tbody></tbody></table>
<p class="muted">JSON: <a href="/api/v1/status">/api/v1/status</a> · <a href="/metrics">/metrics</a> · <a href="/readyz">/readyz</a></p>
<script>
"use strict";
const POLL_MS = 2000;
const STREAM_RETRY_MS = 10000;
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v; else node.setAttribute(k, v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" || typeof child === "number" ? String(child) : child);
  }
  return node;
}
function when(iso) { return iso ? new Date(iso).toLocaleString() : "—"; }
function slotText(slot) {
  if (slot.state === "held") {
    const h = slot.holder;
    const pod = h.pod ? (h.namespace ? h.namespace + "/" : "") + h.pod : "a pod the kubelet has not named yet";
    const live = h.liveFile
      ? "; live file " + h.liveFile.path + " (generation " + h.liveFile.generation + ")"
        + (h.liveFile.stale ? ", stale: " + h.liveFile.stale : "")
      : "";
    return slot.id + ": held by " + pod + " via " + h.resource + (h.since ? " since " + when(h.since) : "") + live
      + (slot.unconfirmed ? "; hold not confirmed by the cluster: " + slot.unconfirmed : "");
  }
  if (slot.state === "elsewhere") return slot.id + ": not offered here: " + slot.elsewhere;
  return slot.id + ": " + slot.state;
}
function instanceRow(i) {
  const props = Object.entries(i.properties).map(([k, v]) => k + "=" + v).join("  ");
  const nodes = i.deviceNodes.map(n => n.hostPath).join(", ");
  return el("tr", {"data-instance": i.name, "data-health": i.health},
    el("td", {}, el("code", {}, i.name), el("div", {class: "muted"}, i.resource)),
    el("td", {}, i.id, nodes ? el("div", {class: "muted"}, nodes) : null, props ? el("div", {class: "props"}, props) : null),
    el("td", {class: i.health}, i.health, i.deviceState ? el("span", {class: "state"}, i.deviceState) : null,
      ...(i.deviceNotes || []).map(n => el("div", {class: "muted note"}, n))),
    el("td", {}, ...i.slots.map(s => el("span", {class: "slot", "data-slot": s.id, "data-state": s.state}, slotText(s)))),
    el("td", {class: i.reason ? "problem" : "muted"}, i.reason || "offered"));
}
function probeText(p) {
  if (!p.lastScan) return "";
  const seconds = p.lastScanDurationSeconds;
  const took = seconds < 0.001 ? "under 1 ms" : seconds < 1 ? Math.round(seconds * 1000) + " ms" : seconds.toFixed(1) + " s";
  return "; last scan " + when(p.lastScan) + " (" + took + ")";
}
function configurationSection(c) {
  const n = c.counts;
  const section = el("section", {"data-configuration": c.name},
    el("h2", {}, c.name + " ", el("span", {class: "muted"},
      "(" + c.handler + ", " + c.resource + ", capacity " + c.capacity + (c.source ? ", " + c.source : "") + ")")),
    el("div", {class: "meta"}, n.healthy + " of " + n.instances + " instances healthy; " +
      n.slotsInUse + " of " + n.slots + " slots in use" + (c.registered ? "" : "; not registered with the kubelet") +
      probeText(c.probe)));
  if (c.problems.length)
    section.append(el("ul", {class: "problems"}, ...c.problems.map(p => el("li", {class: "problem"}, p))));
  if (c.excluded.length) {
    section.append(el("div", {class: "meta"}, "Seen but not offered:"),
      el("ul", {class: "excluded"}, ...c.excluded.map(e => el("li", {"data-excluded": e.id || ""}, e.text))));
  }
  if (c.instances.length) {
    section.append(el("table", {},
      el("thead", {}, el("tr", {}, ...["instance", "device", "health", "slots", "why not offered"].map(h => el("th", {}, h)))),
      el("tbody", {}, ...c.instances.map(instanceRow))));
  }
  return section;
}
function render(s) {
  document.getElementById("node").textContent = s.daemon.node;
  document.title = "devlet on " + s.daemon.node;
  document.getElementById("summary").textContent = s.summary.text;
  const k = s.kubelet;
  document.getElementById("kubelet").textContent =
    k.state === "waiting" ? "waiting for kubelet at " + k.kubeletSocket
    : "kubelet " + k.state + " (" + k.pluginsRegistered + " of " + k.pluginsOffered + " plugins registered)"
      + (k.podResourcesError ? "; PodResources: " + k.podResourcesError : "")
      + (!s.cluster || !s.cluster.enabled ? ""
         : (s.cluster.reachable ? "; cluster API reachable" : "; cluster API unreachable" + (s.cluster.lastError ? ": " + s.cluster.lastError : ""))
           + "; " + s.cluster.leasesHeld + " Leases held here, " + s.cluster.slotsHeldElsewhere + " shared slots held on other nodes"
           + (s.cluster.holdsUnconfirmed ? "; " + s.cluster.holdsUnconfirmed + " held shared slot(s) not confirmed by the API" : "")
           + (s.cluster.brokers && s.cluster.brokers.length ? "; " + s.cluster.brokers.length + " broker pod(s)" : "")
           + (s.cluster.brokers || []).filter(b => b.failed).map(b => "; broker " + b.pod + " failed" + (b.reason ? ": " + b.reason : "")).join("")
           + (s.cluster.brokers || []).filter(b => b.recreations).map(b => "; broker " + b.pod + " made again " + b.recreations + " time(s), last: " + b.recreatedBecause).join("")
           + (s.cluster.token && s.cluster.token.kind === "expiring"
              ? "; token of " + s.cluster.token.serviceAccount + " expires " + s.cluster.token.expiresAt
                + (s.cluster.token.lastRenewal ? ", last renewed " + s.cluster.token.lastRenewal : "")
                + (s.cluster.token.lastError ? " (" + s.cluster.token.lastError + ")" : "")
              : s.cluster.token && s.cluster.token.kind === "doesNotExpire" ? "; token does not expire" : "")
           + (s.cluster.brokersError ? "; brokers: " + s.cluster.brokersError : "")
           + (s.cluster.secrets && s.cluster.secrets.length ? "; " + s.cluster.secrets.filter(x => x.exists).length + " of " + s.cluster.secrets.length + " Secret(s) read" : "")
           + (s.cluster.secretProblems || []).map(p => "; " + p).join(""));
  document.getElementById("ready").textContent = s.summary.ready ? "ready" : "not ready: " + s.summary.notReadyReasons.join("; ");
  document.getElementById("errors").replaceChildren(
    ...s.daemon.configurationErrors.map(e => el("li", {class: "error"}, "configuration error: " + e)));
  const configurations = s.configurations.map(configurationSection);
  if (!configurations.length)
    configurations.push(el("p", {class: "problem"}, "No configurations: put one into " + s.daemon.confDir + "."));
  document.getElementById("configurations").replaceChildren(...configurations);
  document.querySelector("#events tbody").replaceChildren(...s.events.slice(0, 30).map(e =>
    el("tr", {}, el("td", {}, when(e.time)), el("td", {class: e.level === "info" ? "" : e.level === "error" ? "error" : "problem"}, e.level),
      el("td", {}, e.subject), el("td", {}, e.message))));
  document.getElementById("updated").textContent = new Date().toLocaleTimeString();
  document.body.dataset.generation = String(Number(document.body.dataset.generation || 0) + 1);
}
function answered(s) {
  render(s);
  document.getElementById("stale").style.display = "none";
}
function unanswered(why) {
  const stale = document.getElementById("stale");
  stale.textContent = "devlet does not answer (" + why + "); what is shown may be out of date.";
  stale.style.display = "block";
}
function setLive(how) {
  document.body.dataset.live = how;
  document.getElementById("live").textContent = how === "stream" ? "(live)" : "(every " + POLL_MS / 1000 + " s)";
}
// Live updates come as server-sent events; where the stream is refused (too many open) or
// breaks (devlet restarts), the page polls, and tries the stream again now and then.
let streamRetryAt = 0;
function openStream() {
  if (!window.EventSource) return false;
  const stream = new EventSource("/api/v1/status/stream");
  stream.addEventListener("status", e => {
    setLive("stream");
    answered(JSON.parse(e.data));
  });
  stream.onerror = () => {
    stream.close();
    streamRetryAt = Date.now() + STREAM_RETRY_MS;
    setLive("polling");
    poll();
  };
  return true;
}
async function poll() {
  try {
    const response = await fetch("/api/v1/status", {cache: "no-store"});
    if (!response.ok) throw new Error("HTTP " + response.status);
    answered(await response.json());
    if (Date.now() >= streamRetryAt && openStream()) return;
  } catch (e) {
    unanswered(e.message);
  }
  setTimeout(poll, POLL_MS);
}
if (!openStream()) {
  setLive("polling");
  poll();
}
</script>
</body>
</html>
)devlet";

}  // namespace

std::string_view statusPage() {
    return kPage;
}

}  // namespace devlet::status
