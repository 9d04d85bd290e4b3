// The page of `kubectl ifo ui`: watches the live API through the local server (/k8s/…) and
// draws the operations as a timeline (d3), the maintenance gates and the server's warnings.
import { select } from "d3-selection";
import { scaleTime } from "d3-scale";
import { axisTop } from "d3-axis";
import { human, relative, clock, absolute, appendTime } from "./time.js";
import { fitMiddle } from "./fit.js";
import { INCOMPLETE, reasons, resourceOf } from "./stale.js";

// ---- the access token ---------------------------------------------------------------------

/// The request header the local server wants the token in. Never a cookie: cookies are not told
/// apart by port, so every other service on 127.0.0.1 would receive it.
const TOKEN_HEADER = "X-IFO-UI-Token";
const TOKEN_KEY = "ifo-ui-token";

/// This run's token: from the printed URL's fragment (`#token=…`, which a browser sends to no
/// server), at once removed from the address bar and kept in this tab's sessionStorage (this
/// origin's only: scheme, host and port) so a reload keeps working.
function takeToken() {
  const fromUrl = new URLSearchParams(location.hash.slice(1)).get("token");
  if (fromUrl) {
    history.replaceState(null, "", location.pathname + location.search);
    try {
      sessionStorage.setItem(TOKEN_KEY, fromUrl);
    } catch {
      // No storage (a locked-down browser): memory only, a reload needs the printed URL again.
    }
    return fromUrl;
  }
  try {
    return sessionStorage.getItem(TOKEN_KEY);
  } catch {
    return null;
  }
}

const TOKEN = takeToken();

/// A GET of the local server's API, with the token.
const api = (url, signal) => fetch(url, { headers: { Accept: "application/json", [TOKEN_HEADER]: TOKEN ?? "" }, signal, cache: "no-store" });

const API = "/k8s/apis/live.ifo.kubevirt.io/v1alpha1";
const ROW = 22;
const GROUP_HEAD = 24;
const LABEL = 320;
const WATCH_SECONDS = 60;
/// A watch that runs this long past its timeout has stalled: it is cut and started again.
const WATCH_STALLED_MS = (WATCH_SECONDS + 15) * 1000;
/// Operations that ended while the page was open and the server no longer serves: kept at most.
const MAX_KEPT_ENDED = 2000;

const state = {
  namespace: null,
  ops: new Map(), // key → {obj, stream}
  endedHere: new Set(), // keys of operations seen ending while the page was open
  gates: new Map(), // name → {obj, listed, watch, unlistedAt, unwatchedAt}
  streams: [],
  selected: null,
  scope: null, // the gate whose scheduled operations and next window are drawn; null: the cluster's
  filter: { text: "", component: "", phase: "", group: "node" },
  version: 0, // counts the changes to `ops`
};

// ---- reading objects ----------------------------------------------------------------------

const time = (s) => (s ? new Date(s) : null);
/// When an operation started (ms), read once per object: layouts sort thousands by it.
const starts = new WeakMap();
const startOf = (o) => {
  let ms = starts.get(o);
  if (ms === undefined) {
    ms = time(o.metadata?.creationTimestamp)?.getTime() ?? null;
    starts.set(o, ms);
  }
  return ms;
};
// List items may lack `kind`: a namespace (or none, cluster-scoped), a name and the start identify
// one (a subject's next operation of the same kind may reuse the name).
const opKey = (o) => `${o.metadata?.namespace ?? ""}/${o.metadata?.name ?? ""}@${o.metadata?.creationTimestamp ?? ""}`;
const subjectOf = (o) => o.spec?.subject ?? {};
const subjectKey = (o) => {
  const s = subjectOf(o);
  return `${s.kind ?? "?"}/${s.namespace ?? ""}/${s.name ?? ""}`;
};
const subjectLabel = (o) => {
  const s = subjectOf(o);
  return `${s.kind ?? "?"} ${s.namespace ? s.namespace + "/" : ""}${s.name ?? "?"}`;
};
const labelsOf = (o) => o.metadata?.labels ?? {};
const NODE_LABEL = "ifo.kubevirt.io/node";
const TARGET_NODE_LABEL = "ifo.kubevirt.io/target-node";
const nodeOf = (o) => labelsOf(o)[NODE_LABEL] ?? labelsOf(o)[TARGET_NODE_LABEL] ?? "";
/// The nodes an operation is on, each with its role when it has a target node (a migration:
/// `source` and `target`).
function nodesOf(o) {
  const source = labelsOf(o)[NODE_LABEL];
  const target = labelsOf(o)[TARGET_NODE_LABEL];
  if (!target || target === source) return [{ node: source ?? target ?? "", role: "" }];
  return [...(source ? [{ node: source, role: "source" }] : []), { node: target, role: "target" }];
}
const isActive = (o) => (o.status?.phase ?? "Active") !== "Completed";
const condition = (o, type) => (o.status?.conditions ?? []).find((c) => c.type === type);
const isStalled = (o) => isActive(o) && condition(o, "Stalled")?.status === "True";
const outcomeClass = (o) => {
  if (isStalled(o)) return "stalled";
  if (isActive(o)) return "active";
  const outcome = o.status?.outcome ?? "";
  if (outcome === "Succeeded") return "succeeded";
  if (outcome === "Failed") return "failed";
  return "other";
};
/// What a bar says in words: the colour is never the only sign.
const stateWords = (o) => {
  if (isStalled(o)) return `⚠ stalled${condition(o, "Stalled")?.reason ? " (" + condition(o, "Stalled").reason + ")" : ""}`;
  // In its grace (no rule detects it any more): ending, on the same clock as its expected end.
  const ending = isActive(o) && time(o.status?.gracePeriodEnd);
  if (ending) return `ending in ${human(ending.getTime() - Date.now())}`;
  if (isActive(o)) return o.status?.progress != null ? `${Math.round(o.status.progress)}%` : "active";
  const outcome = o.status?.outcome ?? "ended";
  return outcome === "Failed" ? "✗ Failed" : outcome === "Succeeded" ? "✓ Succeeded" : outcome;
};

// ---- watching -----------------------------------------------------------------------------

/// Warning headers (RFC 7234: `299 - "text"`) as their texts.
function warningsOf(response) {
  const raw = response.headers.get("warning");
  if (!raw) return [];
  const texts = [];
  for (const m of raw.matchAll(/\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"/g)) texts.push(m[1].replace(/\\(.)/g, "$1"));
  return texts.length ? texts : [raw];
}

class HttpError extends Error {
  constructor(status, text) {
    super(`${status}: ${text}`);
    this.status = status;
  }
}

/// One list+watch of a collection (`params`: its selectors): lists, watches from the list's
/// resourceVersion, resumes from the last one it saw when a watch ends, relists when that is too
/// old (410), retries with backoff when the connection fails, until stopped.
class Stream {
  constructor(name, path, store, params = {}) {
    this.name = name;
    this.path = path;
    this.params = params;
    this.store = store; // {reset(items), apply(type, obj)}
    this.rv = null;
    this.state = "connecting";
    this.detail = "";
    this.warnings = [];
    this.stopped = false;
    this.abort = null;
    /// When it last stopped being live (not live yet: now).
    this.lostAt = Date.now();
  }

  setState(state, detail = "") {
    if (this.stopped) return;
    if (this.state === "live" && state !== "live") this.lostAt = Date.now();
    this.state = state;
    this.detail = detail;
    render.soon();
  }

  url(extra = {}) {
    const query = new URLSearchParams({ ...this.params, ...extra }).toString();
    return query ? `${this.path}?${query}` : this.path;
  }

  request(url) {
    this.abort = new AbortController();
    return api(url, this.abort.signal);
  }

  /// Ends it for good: no more requests, nothing more reaches its store.
  stop() {
    this.stopped = true;
    this.abort?.abort();
  }

  async list() {
    const response = await this.request(this.url());
    this.warnings = warningsOf(response);
    if (!response.ok) throw new HttpError(response.status, (await response.text()).slice(0, 300));
    const list = await response.json();
    if (this.stopped) return;
    this.store.reset(list.items ?? []);
    this.rv = list.metadata?.resourceVersion ?? null;
  }

  async watch() {
    const url = this.url({ watch: "1", allowWatchBookmarks: "true", timeoutSeconds: String(WATCH_SECONDS), resourceVersion: this.rv });
    const response = await this.request(url);
    if (response.status === 410) {
      this.rv = null;
      return;
    }
    if (!response.ok) throw new HttpError(response.status, (await response.text()).slice(0, 300));
    this.warnings = warningsOf(response);
    this.setState("live");
    // The server ends every watch after WATCH_SECONDS: one that goes on is stuck.
    const abort = this.abort;
    const stalled = setTimeout(() => abort.abort(), WATCH_STALLED_MS);
    try {
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done || this.stopped) break;
        buffer += decoder.decode(value, { stream: true });
        let nl;
        while ((nl = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          if (line) this.event(JSON.parse(line));
        }
      }
    } finally {
      clearTimeout(stalled);
    }
  }

  event(ev) {
    const obj = ev.object ?? {};
    if (ev.type === "ERROR") {
      const error = new Error(obj.message ?? "watch error");
      if (obj.code === 410) {
        this.rv = null;
        error.relist = true;
      }
      throw error;
    }
    if (obj.metadata?.resourceVersion) this.rv = obj.metadata.resourceVersion;
    if (ev.type !== "BOOKMARK") this.store.apply(ev.type, obj);
  }

  async run() {
    let backoff = 500;
    while (!this.stopped) {
      try {
        if (this.rv === null) await this.list();
        if (this.rv !== null && !this.stopped) await this.watch();
        backoff = 500;
      } catch (e) {
        if (this.stopped) return;
        if (e instanceof HttpError && (e.status === 403 || e.status === 401)) {
          this.setState("forbidden", e.message);
          this.rv = null;
          await sleep(30000);
          continue;
        }
        // 410 in an ERROR event: relist at once.
        if (e.relist) {
          this.setState("relisting", e.message);
          continue;
        }
        this.setState("disconnected", e.name === "AbortError" ? "the watch stalled" : e.message || String(e));
        this.rv = null;
        await sleep(backoff);
        backoff = Math.min(backoff * 2, 10000);
      }
    }
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function operationStore(streamIndex) {
  return {
    reset(items) {
      const fresh = new Map(items.map((o) => [opKey(o), o]));
      for (const [key, entry] of state.ops) {
        if (entry.stream === streamIndex && !fresh.has(key) && !state.endedHere.has(key)) state.ops.delete(key);
      }
      for (const [key, obj] of fresh) this.set(key, obj);
      state.version++;
      render.soon();
    },
    apply(type, obj) {
      const key = opKey(obj);
      if (type === "DELETED") {
        if (!state.endedHere.has(key)) state.ops.delete(key);
      } else {
        this.set(key, obj);
      }
      state.version++;
      render.soon();
    },
    set(key, obj) {
      const before = state.ops.get(key);
      if (before && isActive(before.obj) && !isActive(obj)) {
        state.endedHere.add(key);
        if (state.endedHere.size > MAX_KEPT_ENDED) {
          const oldest = state.endedHere.values().next().value;
          state.endedHere.delete(oldest);
        }
      }
      state.ops.set(key, { obj, stream: streamIndex });
    },
  };
}

// A gate is listed (and so watched by the list's watch) while its scope has operations in flight,
// and `cluster` always. One that leaves the list stays shown, and since its verdict can still
// change with nothing in flight (to Unknown, when the server cannot vouch for its data), it is
// watched by name from then on. A verdict no live watch stands behind is greyed out with the time
// it was last current: the page never shows a Clear it does not follow.

/// How long a gate that left the list (nothing in flight any more) stays shown.
const CLEARED_GATE_MS = 10 * 60e3;
/// Requests a browser keeps open at once to one server over HTTP/1.1 (Chromium's, Firefox's and
/// Safari's limit): each stream holds one while it lists or watches, and a request past the
/// limit waits until one ends (a watch lasts up to WATCH_SECONDS). So the gates that left the
/// list are watched by name in the places the page's other streams leave; past that, the one
/// that left longest ago (but the gate of the page's namespace) stops being watched, and is
/// greyed out, rather than a new gate's watch waiting a minute for a place.
const BROWSER_CONNECTIONS = 6;
/// How long a verdict still counts as current once its watch is not live: the hand-over from the
/// list's watch to the gate's own, a reconnection.
const VERDICT_GRACE_MS = 2000;

/// A field selector value, escaped as apimachinery's `fields.EscapeValue` does.
const escapeField = (v) => v.replace(/[\\,=]/g, (c) => `\\${c}`);

/// The list's watch: `cluster` and every gate with operations in flight.
const gateStore = {
  reset(items) {
    const fresh = new Map(items.map((g) => [g.metadata?.name, g]));
    for (const [name, entry] of state.gates) {
      if (entry.listed && !fresh.has(name)) unlistGate(name, null);
    }
    for (const [name, gate] of fresh) listGate(name, gate);
    render.soon();
  },
  apply(type, obj) {
    const name = obj.metadata?.name;
    if (!name) return;
    if (type === "DELETED") unlistGate(name, obj);
    else listGate(name, obj);
    render.soon();
  },
  prune(now) {
    for (const [name, entry] of state.gates) {
      if (!entry.listed && now - entry.unlistedAt > CLEARED_GATE_MS) dropGate(name);
    }
  },
};

function listGate(name, obj) {
  state.gates.get(name)?.watch?.stop();
  state.gates.set(name, { obj, listed: true, watch: null, unlistedAt: null, unwatchedAt: null });
}

/// A gate that left the list: watched by name from now on.
function unlistGate(name, obj) {
  const entry = state.gates.get(name);
  if (!entry?.listed) return;
  const now = Date.now();
  entry.listed = false;
  if (obj) entry.obj = obj;
  entry.unlistedAt = now;
  entry.unwatchedAt = now;
  const watched = [...state.gates.values()].filter((e) => e.watch);
  // The gate of the namespace the page shows is the last to stop being watched.
  const own = state.namespace && `namespace.${state.namespace}`;
  const evictable = watched.filter((e) => e.obj.metadata?.name !== own);
  if (watched.length >= BROWSER_CONNECTIONS - state.streams.length && evictable.length) {
    const oldest = evictable.reduce((a, b) => (b.unlistedAt < a.unlistedAt ? b : a));
    oldest.unwatchedAt = oldest.watch.state === "live" ? now : oldest.watch.lostAt;
    oldest.watch.stop();
    oldest.watch = null;
  }
  entry.watch = new Stream(`gate ${name}`, `${API}/maintenancegates`, namedGateStore(name), { fieldSelector: `metadata.name=${escapeField(name)}` });
  entry.watch.run();
}

/// Forgets a gate that is not listed.
function dropGate(name) {
  const entry = state.gates.get(name);
  if (!entry || entry.listed) return;
  entry.watch?.stop();
  state.gates.delete(name);
  render.soon();
}

/// The watch of one gate by name, while it is not listed.
function namedGateStore(name) {
  return {
    reset(items) {
      const gate = items.find((g) => g.metadata?.name === name);
      // Not there: the gate stopped existing (its namespace or node is gone).
      if (gate) this.apply("MODIFIED", gate);
      else dropGate(name);
    },
    apply(type, obj) {
      const entry = state.gates.get(name);
      if (obj.metadata?.name !== name || !entry || entry.listed) return;
      if (type === "DELETED") dropGate(name);
      else entry.obj = obj;
      render.soon();
    },
  };
}

/// What the page can say of a gate now: its verdict while a live watch stands behind it, else the
/// last one greyed out, as of when it was last current.
function gateView(entry, now) {
  const verdict = verdictOf(entry.obj);
  const source = entry.listed ? state.streams.find((s) => s.name === "gates") : entry.watch;
  const since = source ? (source.state === "live" ? null : Math.max(source.lostAt, entry.unwatchedAt ?? 0)) : entry.unwatchedAt;
  // The watch behind the verdict and its state ("gates: live", "gate node.a: connecting"; "none").
  const watch = source ? `${source.name}: ${source.state}` : "none";
  if (since === null || now - since < VERDICT_GRACE_MS) return { ...verdict, watched: true, watch };
  return {
    watch,
    word: `${verdict.word} as of ${relative(new Date(since), now)}, not watched`,
    asOf: new Date(since),
    cls: "unwatched",
    icon: "⏸",
    last: verdict.cls,
    watched: false,
  };
}

// ---- drawing ------------------------------------------------------------------------------

const render = {
  pending: false,
  soon() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      draw();
    });
  },
};

function matches(o) {
  const f = state.filter;
  if (f.component && o.spec?.component !== f.component) return false;
  if (f.phase === "active" && !isActive(o)) return false;
  if (f.phase === "ended" && isActive(o)) return false;
  if (f.phase === "stalled" && !isStalled(o)) return false;
  if (f.text) {
    const hay = [o.metadata?.name, o.metadata?.namespace, subjectLabel(o), o.spec?.operation, o.spec?.component, nodeOf(o), o.status?.message]
      .join(" ")
      .toLowerCase();
    if (!f.text.toLowerCase().split(/\s+/).every((w) => hay.includes(w))) return false;
  }
  return true;
}

/// The groups an operation is drawn in, each with its part there: grouped by node, a migration
/// is under its source node and its target node.
function placesOf(o) {
  switch (state.filter.group) {
    case "component":
      return [{ group: o.spec?.component || "(no component)", role: "" }];
    case "namespace":
      return [{ group: o.metadata?.namespace || "(cluster-scoped)", role: "" }];
    default:
      return nodesOf(o).map(({ node, role }) => ({ group: node || "(no node)", role }));
  }
}

/// Groups of rows (one row per subject), each row with its operations (`{o, role}`), oldest
/// first.
function layout(ops) {
  const groups = new Map();
  for (const o of ops) {
    for (const { group, role } of placesOf(o)) {
      if (!groups.has(group)) groups.set(group, new Map());
      const rows = groups.get(group);
      const k = subjectKey(o);
      if (!rows.has(k)) rows.set(k, { key: `${group}|${k}`, label: subjectLabel(o), ops: [] });
      rows.get(k).ops.push({ o, role });
    }
  }
  const start = (o) => startOf(o) ?? 0;
  const out = [...groups.entries()]
    .map(([name, rows]) => {
      const list = [...rows.values()];
      for (const r of list) r.ops.sort((a, b) => start(a.o) - start(b.o));
      list.sort((a, b) => start(a.ops[0].o) - start(b.ops[0].o) || a.label.localeCompare(b.label));
      return { name, rows: list, count: list.reduce((n, r) => n + r.ops.length, 0) };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
  let y = 0;
  for (const g of out) {
    g.y = y;
    y += GROUP_HEAD;
    for (const r of g.rows) {
      r.y = y;
      y += ROW;
    }
  }
  return { groups: out, height: y };
}

function domain(ops, now, ahead) {
  let first = now - 60e3;
  let last = now + 10e3;
  for (const o of ops) {
    const s = startOf(o);
    if (s) first = Math.min(first, s);
    const e = time(o.status?.expectedEndP90 ?? o.status?.expectedEnd)?.getTime();
    if (e && isActive(o)) last = Math.max(last, e);
  }
  // The scheduled runs drawn, and the start of the next window.
  for (const r of ahead.runs) last = Math.max(last, (r.endP90 ?? r.start).getTime());
  const opens = ahead.window?.start?.getTime();
  if (opens > now) last = Math.max(last, opens + 60e3);
  first = Math.max(first, now - 6 * 3600e3);
  last = Math.min(last, now + 6 * 3600e3);
  const pad = (now - first) * 0.05;
  first -= pad;
  return [new Date(first), new Date(Math.max(last, now + pad))];
}

/// What an operation's part in its row is called (`source`, `target`), in words.
const roleWords = (role) => (role ? ` (${role})` : "");
const LAST_SEEN = "as last seen";

/// An operation in words, for screen readers and the tooltip: relative times, with the
/// absolute ones when `full`.
function describe(o, now, { role = "", lastSeen = false, full = false } = {}) {
  const at = (d) => (full ? `${relative(d, now)} (${absolute(d)})` : relative(d, now));
  const start = time(o.metadata?.creationTimestamp);
  const parts = [`${o.spec?.operation ?? "?"}${roleWords(role)} on ${subjectLabel(o)}`, stateWords(o)];
  if (lastSeen) parts.push(`${LAST_SEEN}: the server cannot vouch for it now`);
  if (start) parts.push(`started ${at(start)}`);
  const exp = time(o.status?.expectedEnd);
  if (exp && isActive(o)) parts.push(`expected end ${at(exp)}`);
  const p90 = time(o.status?.expectedEndP90);
  if (p90 && isActive(o)) parts.push(`9 in 10 like it end ${at(p90)}`);
  const nodes = nodesOf(o).filter((n) => n.node);
  if (nodes.length) parts.push(nodes.map((n) => `${n.role ? n.role + " " : ""}node ${n.node}`).join(", "));
  return parts.join(", ");
}

/// One label per row, after its last bar: every operation of the subject, oldest first (bars
/// of one subject can be too close for a label each).
const rowWords = (ops, lastSeen) =>
  ops.map(({ o, role }) => `${o.spec?.operation ?? "?"}${roleWords(role)} · ${stateWords(o)}${lastSeen(o) ? ` · ${LAST_SEEN}` : ""}`).join("  →  ");

const FONT = `system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif`;
const SUBJECT_FONT = `12px ${FONT}`;
const GROUP_FONT = `600 13px ${FONT}`;
const WORDS_FONT = `11px ${FONT}`;
/// Rows drawn beyond the visible part of the timeline, above and below (the others are not in
/// the page: thousands of operations stay quick to draw).
const OVERSCAN = 400;

/// `<title>` of an SVG element (its tooltip), set to `text`.
function titled(sel, text) {
  sel.selectAll("title").data([0]).join("title").text(text);
}

/// A row's subject within `width`: whole if it fits, else without its namespace (`VirtualMachine
/// …/vm-0`: the group or the filter tells it), else cut in the middle.
function fitSubject(row, width) {
  if (fitMiddle(row.label, width, SUBJECT_FONT) === row.label) return row.label;
  const s = subjectOf(row.ops[0].o);
  const short = s.namespace ? `${s.kind ?? "?"} …/${s.name ?? "?"}` : row.label;
  return fitMiddle(short, width, SUBJECT_FONT);
}

/// The operations shown and their layout, kept while neither they nor the filter change: the
/// page redraws every second, for the time axis.
let laidOut = { key: null, shown: [], groups: [], height: 0 };
function shownAndLaidOut(all) {
  const key = `${state.version}|${JSON.stringify(state.filter)}`;
  if (laidOut.key !== key) {
    const shown = all.filter(matches);
    laidOut = { key, shown, ...layout(shown) };
  }
  return laidOut;
}

function drawTimeline({ shown: ops, groups, height }, now, lastSeen, ahead) {
  const container = document.getElementById("timeline");
  const width = Math.max(320, container.clientWidth - 2);
  const label = Math.min(LABEL, Math.round(width * 0.3));
  const words = Math.min(300, Math.round(width * 0.25));
  const x = scaleTime().domain(domain(ops, now, ahead)).range([label + 8, width - words]);

  const axisSvg = select("#axis").selectAll("svg").data([0]).join("svg").attr("width", width).attr("height", 26);
  axisSvg
    .selectAll("g.ticks")
    .data([0])
    .join("g")
    .attr("class", "ticks")
    .attr("transform", "translate(0,24)")
    .call(axisTop(x).ticks(Math.max(2, Math.floor((width - label - words) / 90))).tickFormat((d) => clock(d, true)));
  axisSvg.selectAll("line.now").data([0]).join("line").attr("class", "now").attr("x1", x(now)).attr("x2", x(now)).attr("y1", 4).attr("y2", 26);

  const svg = select(container).selectAll("svg").data([0]).join("svg").attr("width", width).attr("height", Math.max(height, 40));
  svg
    .selectAll("defs")
    .data([0])
    .join((enter) => {
      const pattern = enter
        .append("defs")
        .append("pattern")
        .attr("id", "last-seen")
        .attr("width", 6)
        .attr("height", 6)
        .attr("patternUnits", "userSpaceOnUse")
        .attr("patternTransform", "rotate(45)");
      pattern.append("rect").attr("width", 6).attr("height", 6).attr("fill", "#fff").attr("fill-opacity", 0.35);
      pattern.append("rect").attr("width", 3).attr("height", 6).attr("fill", "#fff").attr("fill-opacity", 0.75);
      return enter.select("defs");
    });
  svg.selectAll("line.now").data([0]).join("line").attr("class", "now").attr("x1", x(now)).attr("x2", x(now)).attr("y1", 0).attr("y2", Math.max(height, 40));
  drawWindow(svg, x, ahead, Math.max(height, 40), now);

  // Only what is near the visible part of the timeline.
  const top = container.scrollTop - OVERSCAN;
  const bottom = container.scrollTop + container.clientHeight + OVERSCAN;
  const near = (y, h) => y + h >= top && y <= bottom;
  const visible = groups
    .map((grp) => ({ ...grp, rows: grp.rows.filter((r) => near(r.y, ROW)) }))
    .filter((grp) => grp.rows.length || near(grp.y, GROUP_HEAD));

  const g = svg
    .selectAll("g.group")
    .data(visible, (d) => d.name)
    .join((enter) => {
      const e = enter.append("g").attr("class", "group");
      e.append("rect").attr("class", "group-band");
      e.append("text").attr("class", "group-title");
      return e;
    })
    .attr("transform", (d) => `translate(0,${d.y})`)
    .attr("data-group", (d) => d.name);
  g.select("rect.group-band").attr("width", width).attr("height", GROUP_HEAD - 2);
  g.select("text.group-title")
    .attr("x", 6)
    .attr("y", 16)
    .text((d) => fitMiddle(`${state.filter.group}: ${d.name} (${d.count})`, width - 12, GROUP_FONT))
    .each(function (d) {
      titled(select(this), `${state.filter.group}: ${d.name} (${d.count} operations)`);
    });

  const rows = g
    .selectAll("g.row")
    .data((d) => d.rows.map((r) => ({ ...r, y: r.y - d.y })), (d) => d.key)
    .join((enter) => {
      const e = enter.append("g").attr("class", "row");
      e.append("text").attr("class", "subject");
      e.append("text").attr("class", "op-label");
      return e;
    })
    .attr("transform", (d) => `translate(0,${d.y})`);
  rows
    .select("text.subject")
    .attr("x", 14)
    .attr("y", 15)
    .text((d) => fitSubject(d, label - 14))
    .each(function (d) {
      titled(select(this), d.label);
    });

  const startX = (o) => x(startOf(o) ?? now);
  const endX = (o) => x(isActive(o) ? new Date(now) : time(o.status?.completed) ?? time(o.status?.lastDetected) ?? new Date(now));
  const barW = (o) => Math.max(3, endX(o) - startX(o));
  const expectedX = (o) => {
    const e = time(o.status?.expectedEnd);
    return isActive(o) && e && e > now ? x(e) : 0;
  };
  // The band's far edge (history: by when nine in ten like it have ended), lighter still.
  const bandX = (o) => {
    const e = time(o.status?.expectedEndP90);
    return isActive(o) && e && e > now ? x(e) : 0;
  };

  const bars = rows
    .selectAll("g.op")
    .data((d) => d.ops, (d) => opKey(d.o))
    .join((enter) => {
      const e = enter
        .append("g")
        .attr("class", "op")
        .attr("tabindex", 0)
        .attr("role", "button")
        .on("click", (_, d) => selectOp(opKey(d.o)))
        .on("keydown", (ev, d) => {
          if (ev.key === "Enter" || ev.key === " ") {
            ev.preventDefault();
            selectOp(opKey(d.o));
          }
        });
      e.append("title");
      e.append("rect").attr("class", "band");
      e.append("rect").attr("class", "expected");
      e.append("rect").attr("class", "bar");
      e.append("rect").attr("class", "seen").attr("fill", "url(#last-seen)");
      e.append("rect").attr("class", "progress");
      return e;
    })
    .attr("data-key", (d) => opKey(d.o))
    .attr("data-name", ({ o }) => `${o.metadata?.namespace ? o.metadata.namespace + "/" : ""}${o.metadata?.name}`)
    .attr("data-state", (d) => outcomeClass(d.o))
    .attr("data-role", (d) => d.role || null)
    .attr("data-seen", (d) => (lastSeen(d.o) ? "last" : null))
    .attr("aria-label", ({ o, role }) => describe(o, now, { role, lastSeen: lastSeen(o) }))
    .attr("aria-pressed", (d) => String(state.selected === opKey(d.o)));
  bars.select("title").text(({ o, role }) => describe(o, now, { role, lastSeen: lastSeen(o), full: true }));
  bars
    .select("rect.bar")
    .attr("class", (d) => `bar ${outcomeClass(d.o)}`)
    .attr("x", (d) => startX(d.o))
    .attr("y", 3)
    .attr("height", ROW - 6)
    .attr("width", (d) => barW(d.o));
  bars
    .select("rect.seen")
    .attr("x", (d) => startX(d.o))
    .attr("y", 3)
    .attr("height", ROW - 6)
    .attr("width", (d) => (lastSeen(d.o) ? barW(d.o) : 0));
  bars
    .select("rect.expected")
    .attr("x", (d) => endX(d.o))
    .attr("y", 3)
    .attr("height", ROW - 6)
    .attr("width", (d) => Math.max(0, expectedX(d.o) - endX(d.o)));
  bars
    .select("rect.band")
    .attr("x", (d) => Math.max(endX(d.o), expectedX(d.o)))
    .attr("y", 3)
    .attr("height", ROW - 6)
    .attr("width", (d) => Math.max(0, bandX(d.o) - Math.max(endX(d.o), expectedX(d.o))));
  bars
    .select("rect.progress")
    .attr("x", (d) => startX(d.o))
    .attr("y", ROW - 8)
    .attr("height", 4)
    .attr("width", ({ o }) => (isActive(o) && o.status?.progress != null ? (barW(o) * Math.min(100, Math.max(0, o.status.progress))) / 100 : 0));

  // The row's words after its last bar, within the timeline (cut in the middle if need be).
  rows
    .select("text.op-label")
    .attr("x", (d) => Math.max(...d.ops.map(({ o }) => Math.max(endX(o), expectedX(o), bandX(o)))) + 4)
    .attr("y", 15)
    .each(function (d) {
      const el = select(this);
      const full = rowWords(d.ops, lastSeen);
      el.text(fitMiddle(full, width - Number(el.attr("x")) - 4, WORDS_FONT));
      titled(el, full);
    });
  drawAhead(x, width, label, ahead, now);
}

// ---- what lies ahead: scheduled operations and the next window ----------------------------

/// Rows of scheduled operations drawn at most (one per object and operation).
const MAX_AHEAD_ROWS = 8;

/// The gate whose scheduled operations and next window are drawn: the one picked in the gate
/// list, else the cluster's.
function scopeGate() {
  return (state.scope && state.gates.get(state.scope)?.obj) || state.gates.get("cluster")?.obj || null;
}

/// What the page draws ahead of now for `gate`: its scheduled runs (a page of one namespace reads
/// that namespace's off the cluster's gate) and its next window (p90).
function aheadOf(gate) {
  if (!gate) return { gate: null, runs: [], window: null };
  const name = gate.metadata?.name ?? "";
  const st = gate.status ?? {};
  const runs = (st.scheduled ?? [])
    .filter((r) => !state.namespace || name !== "cluster" || r.subject?.namespace === state.namespace)
    .map((r) => ({
      key: `${r.subject?.kind}|${r.subject?.namespace ?? ""}|${r.subject?.name}|${r.operation}`,
      label: `${r.subject?.kind ?? "?"} ${r.subject?.namespace ? r.subject.namespace + "/" : ""}${r.subject?.name ?? "?"} ${r.operation ?? ""}`,
      start: time(r.expectedStart),
      end: time(r.expectedEnd),
      endP90: time(r.expectedEndP90),
      schedule: r.schedule ? `${r.schedule}${r.timeZone ? " (" + r.timeZone + ")" : ""}` : "",
    }))
    .filter((r) => r.start);
  const w = st.nextWindow;
  const window = w ? { start: time(w.start), end: time(w.end), reason: w.reason, message: w.message } : null;
  return { gate: name, runs, window };
}

/// One scheduled run in words, for its tooltip and accessible name.
function runWords(r, now) {
  const takes = r.end ? `, expected to take ${human(r.end - r.start)}${r.endP90 ? ` (9 in 10 within ${human(r.endP90 - r.start)})` : ""}` : ", its duration not learned yet";
  return `${r.label}: scheduled ${relative(r.start, now)} (${absolute(r.start)})${takes}${r.schedule ? `; schedule ${r.schedule}` : ""}`;
}

/// The next window of the picked gate, as a band behind the rows of `svg`, `height` high.
function drawWindow(svg, x, ahead, height, now) {
  const [first, last] = x.domain();
  const w = ahead.window;
  const open = w?.start ? new Date(Math.max(w.start.getTime(), first.getTime())) : null;
  const close = w?.end && w.end < last ? w.end : last;
  const data = open && open < close ? [{ open, close }] : [];
  svg
    .selectAll("rect.window")
    .data(data)
    .join((enter) => {
      const r = enter.insert("rect", ":first-child").attr("class", "window");
      r.append("title");
      return r;
    })
    .attr("x", (d) => x(d.open))
    .attr("width", (d) => Math.max(0, x(d.close) - x(d.open)))
    .attr("y", 0)
    .attr("height", height)
    .attr("data-start", () => w.start.toISOString())
    .attr("data-end", () => (w.end ? w.end.toISOString() : null))
    .select("title")
    .text(() => `Next window of ${ahead.gate} (p90): ${w.start <= now ? "open now" : "from " + absolute(w.start)}${w.end ? ", until " + absolute(w.end) : ""}. ${localTimes(w.message)}`);
}

/// The scheduled runs of the picked gate, above the timeline, on its time axis.
function drawAhead(x, width, label, ahead, now) {
  const box = document.getElementById("ahead");
  const rows = new Map();
  for (const r of ahead.runs) {
    if (!rows.has(r.key)) {
      if (rows.size === MAX_AHEAD_ROWS) continue;
      rows.set(r.key, { key: r.key, label: r.label, runs: [] });
    }
    rows.get(r.key).runs.push(r);
  }
  const list = [...rows.values()];
  const title = document.getElementById("ahead-title");
  title.textContent = ahead.gate
    ? `Scheduled in ${ahead.gate}: ${ahead.runs.length ? `${ahead.runs.length} run${ahead.runs.length > 1 ? "s" : ""} ahead` : "nothing announced"}${ahead.window ? windowWords(ahead.window, now) : ""}`
    : "";
  box.dataset.gate = ahead.gate ?? "";
  const height = list.length * ROW + 4;
  const svg = select(box).selectAll("svg").data([0]).join("svg").attr("width", width).attr("height", height);
  svg.selectAll("line.now").data([0]).join("line").attr("class", "now").attr("x1", x(now)).attr("x2", x(now)).attr("y1", 0).attr("y2", height);
  drawWindow(svg, x, ahead, height, now);
  const [, last] = x.domain();
  const g = svg
    .selectAll("g.ahead-row")
    .data(list, (d) => d.key)
    .join("g")
    .attr("class", "ahead-row")
    .attr("transform", (_, i) => `translate(0,${i * ROW})`)
    .attr("data-subject", (d) => d.label);
  g.selectAll("text.subject")
    .data((d) => [d])
    .join("text")
    .attr("class", "subject")
    .attr("x", 14)
    .attr("y", 15)
    .text((d) => fitMiddle(d.label, label - 14, SUBJECT_FONT))
    .each(function (d) {
      titled(select(this), d.label);
    });
  g.selectAll("rect.scheduled")
    .data((d) => d.runs.filter((r) => r.start <= last), (r) => r.start.toISOString())
    .join((enter) => {
      const r = enter.append("rect").attr("class", "scheduled");
      r.append("title");
      return r;
    })
    .attr("x", (r) => x(r.start))
    .attr("y", 3)
    .attr("height", ROW - 6)
    .attr("width", (r) => Math.max(3, x(r.endP90 ?? r.end ?? r.start) - x(r.start)))
    .attr("data-start", (r) => r.start.toISOString())
    .attr("data-learned", (r) => String(Boolean(r.endP90)))
    .attr("aria-label", (r) => runWords(r, now))
    .select("title")
    .text((r) => runWords(r, now));
}

/// ` · window open now until 14:00`, ` · no window: …`.
function windowWords(w, now) {
  if (!w.start) return ` · no window (${w.reason})`;
  const from = w.start <= now ? "open now" : `from ${clock(w.start)} (${relative(w.start, now)})`;
  return ` · window ${from}${w.end ? ` until ${clock(w.end)}` : ""}`;
}

function verdictOf(gate) {
  const clear = (gate.status?.conditions ?? []).find((c) => c.type === "Clear");
  if (clear?.status === "True") return { word: "Clear", cls: "clear", icon: "✓" };
  if (clear?.status === "False") return { word: "In flight", cls: "blocked", icon: "●" };
  return { word: "Unknown", cls: "unknown", icon: "?" };
}

function gateRank(name) {
  if (name === "cluster") return 0;
  if (name.startsWith("node.")) return 1;
  if (name.startsWith("component.")) return 2;
  return 3;
}

/// What a node's gate says of the node's maintenance override (its `Overridden` condition): `in
/// force` (every eviction of the node's pods let through the guard, whatever the verdict), or
/// `not in force` (ended, or an end that cannot be read); `null` without one.
function overrideOf(gate) {
  const c = (gate.status?.conditions ?? []).find((c) => c.type === "Overridden");
  if (!c) return null;
  const message = c.message ?? "";
  if (c.status === "True") {
    const since = time(c.lastTransitionTime);
    const until = message.match(/until (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)$/);
    return {
      state: "in-force",
      message,
      words: `⚠ guard overridden${since ? ` since ${absolute(since)}` : ""}${until ? ` until ${absolute(new Date(until[1]))}` : ", no end"}: drains of this node do not wait`,
    };
  }
  const why = c.reason === "InvalidOverrideEnd" ? "its end cannot be read" : "ended";
  return { state: "not-in-force", message, words: `override not in force (${why}): the guard holds` };
}

/// `text` with the RFC 3339 times the server writes in messages as the page's absolute times.
const localTimes = (text) => text.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z/g, (t) => absolute(new Date(t)));

/// A gate's one-line message: the full one on hover.
function gateMessage(g, view) {
  if (!view.watched) return "This page no longer follows this gate: ask kubectl ifo check, or reload.";
  const c = (g.status?.conditions ?? []).find((c) => c.type === "Clear");
  if (!c || c.status === "True") return "";
  if (view.cls !== "unknown") return c.message ?? "";
  const seen = (c.message ?? "").match(/\(as last seen, (\d+) in flight/);
  return `Not vouched for (see the warning)${seen ? `; ${seen[1]} in flight ${LAST_SEEN}` : ""}.`;
}

function drawGates(now) {
  gateStore.prune(now);
  const stream = state.streams.find((s) => s.name === "gates");
  const note = document.getElementById("gates-note");
  note.hidden = stream.state !== "forbidden";
  note.textContent = "You may not read maintenance gates (they need get, list and watch on maintenancegates.live.ifo.kubevirt.io, cluster-wide).";
  const gates = [...state.gates.values()]
    .map((entry) => ({ g: entry.obj, view: gateView(entry, now) }))
    .sort((a, b) => gateRank(a.g.metadata.name) - gateRank(b.g.metadata.name) || a.g.metadata.name.localeCompare(b.g.metadata.name));
  const items = select("#gates")
    .selectAll("li")
    .data(gates, (d) => d.g.metadata.name)
    .join((enter) => {
      const li = enter.append("li").attr("class", "gate");
      const head = li.append("div").attr("class", "gate-head");
      head.append("span").attr("class", "gate-name");
      head.append("span").attr("class", "verdict");
      li.append("div").attr("class", "gate-info");
      li.append("div").attr("class", "gate-override");
      li.append("div").attr("class", "gate-message");
      return li;
    })
    .attr("data-gate", (d) => d.g.metadata.name)
    .attr("data-scope", (d) => String(d.g === scopeGate()))
    .attr("tabindex", 0)
    .attr("title", "Show this scope's scheduled operations and next window on the timeline")
    .on("click", (_, d) => pickScope(d.g.metadata.name))
    .on("keydown", (ev, d) => {
      if (ev.key === "Enter" || ev.key === " ") {
        ev.preventDefault();
        pickScope(d.g.metadata.name);
      }
    })
    .attr("data-verdict", (d) => d.view.cls)
    .attr("data-watched", (d) => String(d.view.watched))
    .attr("data-watch", (d) => d.view.watch);
  items.select(".gate-name").text((d) => d.g.metadata.name);
  items
    .select(".verdict")
    .attr("class", (d) => `verdict ${d.view.cls}`)
    .attr("title", (d) => (d.view.asOf ? `last current at ${absolute(d.view.asOf)}` : null))
    .text((d) => `${d.view.icon} ${d.view.word}`);
  items.select(".gate-info").each(function ({ g }) {
    const el = select(this);
    el.selectAll("*").remove();
    const st = g.status ?? {};
    const active = st.activeOperations ?? 0;
    el.append("span").text(`${active} active`);
    const at = time(st.expectedClearTime);
    if (at) {
      el.append("span").text(" · expected clear ");
      appendTime(el, at, now);
      if (at <= now) el.append("span").text(" (overdue)");
    } else if (active > 0) el.append("span").text(" · no estimate");
    if ((st.conditions ?? []).some((c) => c.type === "Stalled" && c.status === "True")) el.append("span").text(" · ⚠ stalled");
  });
  items
    .attr("data-overridden", ({ g }) => overrideOf(g)?.state ?? null)
    .select(".gate-override")
    .attr("hidden", ({ g }) => (overrideOf(g) ? null : ""))
    .text(({ g }) => overrideOf(g)?.words ?? "")
    .attr("title", ({ g }) => {
      const o = overrideOf(g);
      return o ? localTimes(o.message) : null;
    });
  items
    .select(".gate-message")
    .text(({ g, view }) => gateMessage(g, view))
    .attr("title", ({ g }) => {
      const message = (g.status?.conditions ?? []).find((c) => c.type === "Clear")?.message;
      return message ? localTimes(message) : null;
    });
}

/// The banner of what may be incomplete: a line that says so and how many reasons, the first
/// reason with its remedy, and every reason, warning and Unknown gate in a `<details>`.
function drawWarnings(warnings, unknownGates, told) {
  const box = document.getElementById("warnings");
  box.hidden = told.lines.length === 0;
  if (box.hidden) return;
  const incomplete = unknownGates.length > 0 || warnings.some((w) => w.startsWith(INCOMPLETE));
  const counts = [`${told.lines.length} ${told.lines.length === 1 ? "reason" : "reasons"}`];
  if (unknownGates.length) counts.push(`${unknownGates.length} ${unknownGates.length === 1 ? "gate" : "gates"} Unknown`);
  const head = incomplete
    ? `⚠ What is shown may be incomplete (${counts.join(", ")}): operations the server cannot vouch for are drawn hatched, "${LAST_SEEN}".`
    : `⚠ The server warns (${counts[0]}):`;
  select(box).selectAll("p.warnings-head").data([head]).join("p").attr("class", "warnings-head").text((t) => t);
  select(box)
    .selectAll("p.warnings-reason")
    .data(told.lines.slice(0, 1))
    .join("p")
    .attr("class", "warnings-reason")
    .attr("title", (t) => t)
    .text((t) => t);
  const details = select(box)
    .selectAll("details")
    .data([0])
    .join((enter) => {
      const d = enter.append("details");
      d.append("summary");
      d.append("ul");
      return d;
    });
  const all = [...told.lines.slice(1), ...told.detail];
  details.select("summary").text(`Details: ${told.lines.length > 1 ? `${told.lines.length - 1} more ${told.lines.length === 2 ? "reason" : "reasons"}, ` : ""}${told.detail.length} ${told.detail.length === 1 ? "warning" : "warnings"} as received`);
  details
    .select("ul")
    .selectAll("li")
    .data(all, (t) => t)
    .join("li")
    .attr("class", (_, i) => (i < told.lines.length - 1 ? "reason" : "received"))
    .text((t) => t);
}

function drawConnection(incomplete) {
  const el = document.getElementById("connection");
  const bad = state.streams.filter((s) => s.state === "disconnected" || s.state === "connecting" || s.state === "relisting");
  const forbidden = state.streams.filter((s) => s.state === "forbidden" && s.name !== "gates");
  let st = "live";
  let text = "● Live";
  let title = "Every watch is live and the server vouches for its answers.";
  if (forbidden.length) {
    st = "forbidden";
    text = `✗ Forbidden: ${forbidden.map((s) => s.detail).join("; ")}`;
    title = text;
  } else if (bad.some((s) => s.state === "disconnected")) {
    st = "disconnected";
    const detail = bad.find((s) => s.state === "disconnected").detail;
    text = "✗ Connection lost, retrying";
    title = `${detail}: what is shown is as last seen`;
  } else if (bad.length) {
    st = "connecting";
    text = "… Connecting";
  } else if (incomplete) {
    st = "incomplete";
    text = "● Live, answers incomplete";
    title = "The watches are live, but the server cannot vouch for everything: see the warning.";
  }
  el.dataset.state = st;
  el.textContent = text;
  el.title = title;
}

function drawFilters(all) {
  const components = [...new Set(all.map((o) => o.spec?.component).filter(Boolean))].sort();
  select("#filter-component")
    .selectAll("option.c")
    .data(components, (c) => c)
    .join("option")
    .attr("class", "c")
    .attr("value", (c) => c)
    .text((c) => c);
}

function drawDetail(now, lastSeen) {
  const aside = document.getElementById("detail");
  const entry = state.selected && state.ops.get(state.selected);
  aside.hidden = !entry;
  if (!entry) return;
  const o = entry.obj;
  const st = o.status ?? {};
  const at = (s, suffix = "") => (s ? { at: time(s), suffix } : null);
  const nodes = nodesOf(o).filter((n) => n.node);
  const fields = [
    ["Name", o.metadata?.name],
    ["Namespace", o.metadata?.namespace ?? "(cluster-scoped)"],
    ["Subject", subjectLabel(o)],
    ["Operation", o.spec?.operation],
    ["Component", o.spec?.component],
    ["Rule set", o.spec?.ruleSet],
    ["Phase", st.phase],
    ["Outcome", st.outcome],
    ["State", `${stateWords(o)}${lastSeen(o) ? ` (${LAST_SEEN}: the server cannot vouch for it now)` : ""}`],
    ["Started", at(o.metadata?.creationTimestamp)],
    ["Last detected", at(st.lastDetected)],
    ["Completed", at(st.completed)],
    ["Expected end", at(st.expectedEnd, st.estimate ? ` (from ${st.estimate})` : "")],
    ["9 in 10 end", at(st.expectedEndP90)],
    ["Progress", st.progress != null ? `${st.progress}%` : null],
    ["Message", st.message],
    [nodes.length > 1 ? "Nodes" : "Node", nodes.map((n) => `${n.node}${roleWords(n.role)}`).join(", ")],
    ["Detected by", (st.detectedBy ?? []).join(", ")],
    ...(st.conditions ?? []).map((c) => [`Condition ${c.type}`, `${c.status}${c.reason ? " (" + c.reason + ")" : ""}${c.message ? ": " + c.message : ""}`]),
    ["Labels", Object.entries(labelsOf(o)).map(([k, v]) => `${k}=${v}`).join("\n")],
  ].filter(([, v]) => v != null && v !== "");
  document.getElementById("detail-title").textContent = `${o.spec?.operation ?? "Operation"}: ${subjectLabel(o)}`;
  const dl = select("#detail-fields");
  dl.selectAll("*").remove();
  for (const [k, v] of fields) {
    dl.append("dt").text(k);
    const dd = dl.append("dd");
    if (typeof v === "object") {
      appendTime(dd, v.at, now);
      if (v.suffix) dd.append("span").text(v.suffix);
    } else dd.text(localTimes(String(v)));
  }
}

function pickScope(name) {
  state.scope = name === "cluster" ? null : name;
  render.soon();
}

function selectOp(key) {
  state.selected = key;
  render.soon();
  requestAnimationFrame(() => document.getElementById("detail-close").focus());
}

function draw() {
  const began = performance.now();
  const now = Date.now();
  const entries = [...state.ops.values()];
  const all = entries.map((e) => e.obj);
  const laid = shownAndLaidOut(all);
  const shown = laid.shown;
  const warnings = [...new Set(state.streams.flatMap((s) => s.warnings))];
  const unknownGates = [...state.gates.values()].filter((e) => gateView(e, now).cls === "unknown").map((e) => e.obj);
  const told = reasons(warnings, unknownGates);
  // Operations the page knows only as last seen: on a target the server does not watch now, or
  // from a watch that is not live.
  const lost = new Set(entries.filter((e) => state.streams[e.stream]?.state === "disconnected").map((e) => e.obj));
  const lastSeen = (o) => isActive(o) && (lost.has(o) || (told.targets.size > 0 && told.targets.has(resourceOf(o))));
  drawFilters(all);
  drawTimeline(laid, now, lastSeen, aheadOf(scopeGate()));
  drawGates(now);
  drawWarnings(warnings, unknownGates, told);
  drawConnection(unknownGates.length > 0 || warnings.some((w) => w.startsWith(INCOMPLETE)));
  drawDetail(now, lastSeen);
  const active = shown.filter(isActive).length;
  const stalled = shown.filter(isStalled).length;
  const seen = shown.filter(lastSeen).length;
  document.getElementById("counts").textContent =
    `${shown.length} of ${all.length} operations shown: ${active} active${seen ? ` (${seen} ${LAST_SEEN})` : ""}, ${stalled} stalled, ${shown.length - active} ended.`;
  // How long drawing took, for the browser's performance tools (User Timing).
  performance.measure("ifo-draw", { start: began, detail: { operations: all.length } });
}

// ---- start --------------------------------------------------------------------------------

async function start() {
  if (!TOKEN) throw new Error("this page needs the access token: open the URL `kubectl ifo ui` printed (it ends in #token=…)");
  const response = await api("/config.json");
  if (!response.ok) throw new Error(`${response.status}: ${(await response.text()).trim()}`);
  const config = await response.json();
  state.namespace = config.namespace;
  document.getElementById("scope").textContent = config.namespace ? `namespace ${config.namespace}` : "all namespaces";
  const paths = config.namespace
    ? [`${API}/namespaces/${encodeURIComponent(config.namespace)}/inflightoperations`]
    : [`${API}/inflightoperations`, `${API}/inflightclusteroperations`];
  state.streams = paths.map((p, i) => new Stream(`operations-${i}`, p, operationStore(i)));
  state.streams.push(new Stream("gates", `${API}/maintenancegates`, gateStore));

  const form = document.getElementById("controls");
  form.addEventListener("submit", (e) => e.preventDefault());
  form.addEventListener("input", () => {
    state.filter.text = document.getElementById("filter-text").value.trim();
    state.filter.component = document.getElementById("filter-component").value;
    state.filter.phase = document.getElementById("filter-phase").value;
    state.filter.group = form.querySelector("input[name=group]:checked").value;
    render.soon();
  });
  document.getElementById("detail-close").addEventListener("click", () => {
    const key = state.selected;
    state.selected = null;
    render.soon();
    requestAnimationFrame(() => document.querySelector(`g.op[data-key="${CSS.escape(key)}"]`)?.focus());
  });
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && state.selected) document.getElementById("detail-close").click();
  });
  window.addEventListener("resize", () => render.soon());
  document.getElementById("timeline").addEventListener("scroll", () => render.soon(), { passive: true });
  // The time axis follows now.
  setInterval(() => render.soon(), 1000);
  for (const s of state.streams) s.run();
  render.soon();
}

start().catch((e) => {
  const el = document.getElementById("connection");
  el.dataset.state = "disconnected";
  el.textContent = `✗ Cannot start: ${e.message}`;
});
