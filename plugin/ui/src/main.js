// The page of `kubectl ifo ui`: watches the live API through the local server (/k8s/…) and
// draws the operations as a timeline (d3), the maintenance gates and the server's warnings.
import { select } from "d3-selection";
import { scaleTime } from "d3-scale";
import { axisTop } from "d3-axis";

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
const LABEL = 270;
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
  filter: { text: "", component: "", phase: "", group: "node" },
};

// ---- reading objects ----------------------------------------------------------------------

const time = (s) => (s ? new Date(s) : null);
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
const nodeOf = (o) => labelsOf(o)["ifo.kubevirt.io/node"] ?? labelsOf(o)["ifo.kubevirt.io/target-node"] ?? "";
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

function human(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${s % 60 ? (s % 60) + "s" : ""}`;
  const h = Math.floor(m / 60);
  return `${h}h${m % 60 ? (m % 60) + "m" : ""}`;
}
const clock = (d) => d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });

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
      render.soon();
    },
    apply(type, obj) {
      const key = opKey(obj);
      if (type === "DELETED") {
        if (!state.endedHere.has(key)) state.ops.delete(key);
      } else {
        this.set(key, obj);
      }
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
/// Gates that left the list watched by name at once; past that, the one that left longest ago
/// (but the gate of the page's namespace) stops being watched, and is greyed out.
const MAX_GATE_WATCHES = 12;
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
  if (watched.length >= MAX_GATE_WATCHES && evictable.length) {
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
  if (since === null || now - since < VERDICT_GRACE_MS) return { ...verdict, watched: true };
  return {
    word: `${verdict.word} as of ${clock(new Date(since))}, not watched`,
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

function groupOf(o) {
  switch (state.filter.group) {
    case "component":
      return o.spec?.component || "(no component)";
    case "namespace":
      return o.metadata?.namespace || "(cluster-scoped)";
    default:
      return nodeOf(o) || "(no node)";
  }
}

/// Groups of rows (one row per subject), each row with its operations, oldest first.
function layout(ops) {
  const groups = new Map();
  for (const o of ops) {
    const g = groupOf(o);
    if (!groups.has(g)) groups.set(g, new Map());
    const rows = groups.get(g);
    const k = subjectKey(o);
    if (!rows.has(k)) rows.set(k, { key: `${g}|${k}`, label: subjectLabel(o), ops: [] });
    rows.get(k).ops.push(o);
  }
  const start = (o) => time(o.metadata?.creationTimestamp)?.getTime() ?? 0;
  const out = [...groups.entries()]
    .map(([name, rows]) => {
      const list = [...rows.values()];
      for (const r of list) r.ops.sort((a, b) => start(a) - start(b));
      list.sort((a, b) => start(a.ops[0]) - start(b.ops[0]) || a.label.localeCompare(b.label));
      return { name, rows: list };
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

function domain(ops, now) {
  let first = now - 60e3;
  let last = now + 10e3;
  for (const o of ops) {
    const s = time(o.metadata?.creationTimestamp)?.getTime();
    if (s) first = Math.min(first, s);
    const e = time(o.status?.expectedEnd)?.getTime();
    if (e && isActive(o)) last = Math.max(last, e);
  }
  first = Math.max(first, now - 6 * 3600e3);
  last = Math.min(last, now + 6 * 3600e3);
  const pad = (now - first) * 0.05;
  first -= pad;
  return [new Date(first), new Date(Math.max(last, now + pad))];
}

function describe(o, now) {
  const start = time(o.metadata?.creationTimestamp);
  const parts = [`${o.spec?.operation ?? "?"} on ${subjectLabel(o)}`, stateWords(o)];
  if (start) parts.push(`started ${clock(start)}, ${human(now - start)} ago`);
  const exp = time(o.status?.expectedEnd);
  if (exp && isActive(o)) parts.push(`expected end ${clock(exp)}`);
  if (nodeOf(o)) parts.push(`node ${nodeOf(o)}`);
  return parts.join(", ");
}

/// One label per row, after its last bar: every operation of the subject, oldest first (bars
/// of one subject can be too close for a label each).
const rowWords = (ops) => ops.map((o) => `${o.spec?.operation ?? "?"} · ${stateWords(o)}`).join("  →  ");

function drawTimeline(ops, now) {
  const container = document.getElementById("timeline");
  const width = Math.max(600, container.clientWidth - 4);
  const x = scaleTime().domain(domain(ops, now)).range([LABEL + 8, width - 300]);
  const { groups, height } = layout(ops);

  const axisSvg = select("#axis").selectAll("svg").data([0]).join("svg").attr("width", width).attr("height", 26);
  axisSvg.selectAll("g.ticks").data([0]).join("g").attr("class", "ticks").attr("transform", "translate(0,24)").call(axisTop(x).ticks(Math.floor((width - LABEL) / 110)));
  axisSvg.selectAll("line.now").data([0]).join("line").attr("class", "now").attr("x1", x(now)).attr("x2", x(now)).attr("y1", 4).attr("y2", 26);

  const svg = select(container).selectAll("svg").data([0]).join("svg").attr("width", width).attr("height", Math.max(height, 40));
  svg.selectAll("line.now").data([0]).join("line").attr("class", "now").attr("x1", x(now)).attr("x2", x(now)).attr("y1", 0).attr("y2", Math.max(height, 40));

  const g = svg
    .selectAll("g.group")
    .data(groups, (d) => d.name)
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
    .text((d) => `${state.filter.group}: ${d.name} (${d.rows.reduce((n, r) => n + r.ops.length, 0)})`);

  const rows = g
    .selectAll("g.row")
    .data((d) => d.rows.map((r) => ({ ...r, y: r.y - d.y })), (d) => d.key)
    .join((enter) => {
      const e = enter.append("g").attr("class", "row");
      e.append("text").attr("class", "subject");
      return e;
    })
    .attr("transform", (d) => `translate(0,${d.y})`);
  rows
    .select("text.subject")
    .attr("x", 14)
    .attr("y", 15)
    .text((d) => (d.label.length > 38 ? d.label.slice(0, 37) + "…" : d.label))
    .each(function (d) {
      select(this).selectAll("title").data([d.label]).join("title").text((t) => t);
    });

  const bars = rows
    .selectAll("g.op")
    .data((d) => d.ops, opKey)
    .join((enter) => {
      const e = enter
        .append("g")
        .attr("class", "op")
        .attr("tabindex", 0)
        .attr("role", "button")
        .on("click", (_, o) => selectOp(opKey(o)))
        .on("keydown", (ev, o) => {
          if (ev.key === "Enter" || ev.key === " ") {
            ev.preventDefault();
            selectOp(opKey(o));
          }
        });
      e.append("rect").attr("class", "expected");
      e.append("rect").attr("class", "bar");
      e.append("rect").attr("class", "progress");
      e.append("text").attr("class", "op-label");
      return e;
    })
    .attr("data-key", opKey)
    .attr("data-name", (o) => `${o.metadata?.namespace ? o.metadata.namespace + "/" : ""}${o.metadata?.name}`)
    .attr("data-state", outcomeClass)
    .attr("aria-label", (o) => describe(o, now))
    .attr("aria-pressed", (o) => String(state.selected === opKey(o)));

  const startX = (o) => x(time(o.metadata?.creationTimestamp) ?? new Date(now));
  const endX = (o) => x(isActive(o) ? new Date(now) : time(o.status?.completed) ?? time(o.status?.lastDetected) ?? new Date(now));
  const barW = (o) => Math.max(3, endX(o) - startX(o));
  bars
    .select("rect.bar")
    .attr("class", (o) => `bar ${outcomeClass(o)}`)
    .attr("x", startX)
    .attr("y", 3)
    .attr("height", ROW - 6)
    .attr("width", barW);
  bars
    .select("rect.expected")
    .attr("x", (o) => endX(o))
    .attr("y", 3)
    .attr("height", ROW - 6)
    .attr("width", (o) => {
      const e = time(o.status?.expectedEnd);
      return isActive(o) && e && e > now ? Math.max(0, x(e) - endX(o)) : 0;
    });
  bars
    .select("rect.progress")
    .attr("x", startX)
    .attr("y", ROW - 8)
    .attr("height", 4)
    .attr("width", (o) => (isActive(o) && o.status?.progress != null ? (barW(o) * Math.min(100, Math.max(0, o.status.progress))) / 100 : 0));
  bars
    .select("text.op-label")
    .attr("x", (o) => {
      const e = time(o.status?.expectedEnd);
      return Math.max(endX(o), isActive(o) && e && e > now ? x(e) : 0) + 4;
    })
    .attr("y", 15)
    .text((o, i, nodes) => (i === nodes.length - 1 ? rowWords(select(nodes[i].parentNode.parentNode).datum().ops) : ""));
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
      li.append("div").attr("class", "gate-message");
      return li;
    })
    .attr("data-gate", (d) => d.g.metadata.name)
    .attr("data-verdict", (d) => d.view.cls)
    .attr("data-watched", (d) => String(d.view.watched));
  items.select(".gate-name").text((d) => d.g.metadata.name);
  items
    .select(".verdict")
    .attr("class", (d) => `verdict ${d.view.cls}`)
    .text((d) => `${d.view.icon} ${d.view.word}`);
  items.select(".gate-info").text(({ g }) => {
    const st = g.status ?? {};
    const parts = [`${st.activeOperations ?? 0} active`];
    const at = time(st.expectedClearTime);
    if (at) parts.push(at > now ? `expected clear in ~${human(at - now)}, at ${clock(at)}` : `expected clear at ${clock(at)} (overdue)`);
    else if ((st.activeOperations ?? 0) > 0) parts.push("no estimate");
    if ((g.status?.conditions ?? []).some((c) => c.type === "Stalled" && c.status === "True")) parts.push("⚠ stalled");
    return parts.join(" · ");
  });
  items.select(".gate-message").text(({ g, view }) => {
    if (!view.watched) return "This page no longer follows this gate: ask kubectl ifo check, or reload.";
    const c = (g.status?.conditions ?? []).find((c) => c.type === "Clear");
    return c && c.status !== "True" ? c.message ?? "" : "";
  });
}

function drawWarnings() {
  const texts = new Set();
  for (const s of state.streams) for (const w of s.warnings) texts.add(w);
  for (const { obj: g } of state.gates.values()) {
    if (verdictOf(g).cls === "unknown") {
      const c = (g.status?.conditions ?? []).find((c) => c.type === "Clear");
      texts.add(`gate ${g.metadata.name}: ${c?.message ?? "no verdict"}`);
    }
  }
  const box = document.getElementById("warnings");
  box.hidden = texts.size === 0;
  select(box)
    .selectAll("p")
    .data([...texts], (t) => t)
    .join("p")
    .text((t) => `Warning: ${t}`);
}

function drawConnection() {
  const el = document.getElementById("connection");
  const bad = state.streams.filter((s) => s.state === "disconnected" || s.state === "connecting" || s.state === "relisting");
  const forbidden = state.streams.filter((s) => s.state === "forbidden" && s.name !== "gates");
  let st = "live";
  let text = "● Live";
  if (forbidden.length) {
    st = "forbidden";
    text = `✗ Forbidden: ${forbidden.map((s) => s.detail).join("; ")}`;
  } else if (bad.some((s) => s.state === "disconnected")) {
    st = "disconnected";
    text = `✗ Disconnected, retrying: ${bad.find((s) => s.state === "disconnected").detail}`;
  } else if (bad.length) {
    st = "connecting";
    text = "… Connecting";
  }
  el.dataset.state = st;
  el.textContent = text;
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

function drawDetail(now) {
  const aside = document.getElementById("detail");
  const entry = state.selected && state.ops.get(state.selected);
  aside.hidden = !entry;
  if (!entry) return;
  const o = entry.obj;
  const st = o.status ?? {};
  const fields = [
    ["Name", o.metadata?.name],
    ["Namespace", o.metadata?.namespace ?? "(cluster-scoped)"],
    ["Subject", subjectLabel(o)],
    ["Operation", o.spec?.operation],
    ["Component", o.spec?.component],
    ["Rule set", o.spec?.ruleSet],
    ["Phase", st.phase],
    ["Outcome", st.outcome],
    ["State", stateWords(o)],
    ["Started", o.metadata?.creationTimestamp && `${o.metadata.creationTimestamp} (${human(now - time(o.metadata.creationTimestamp))} ago)`],
    ["Last detected", st.lastDetected],
    ["Completed", st.completed],
    ["Expected end", st.expectedEnd && `${st.expectedEnd}${st.estimate ? " (from " + st.estimate + ")" : ""}`],
    ["Progress", st.progress != null ? `${st.progress}%` : null],
    ["Message", st.message],
    ["Node", nodeOf(o)],
    ["Detected by", (st.detectedBy ?? []).join(", ")],
    ...(st.conditions ?? []).map((c) => [`Condition ${c.type}`, `${c.status}${c.reason ? " (" + c.reason + ")" : ""}${c.message ? ": " + c.message : ""}`]),
    ...Object.entries(labelsOf(o)).map(([k, v]) => [`Label ${k}`, v]),
  ].filter(([, v]) => v != null && v !== "");
  document.getElementById("detail-title").textContent = `${o.spec?.operation ?? "Operation"}: ${subjectLabel(o)}`;
  const dl = select("#detail-fields");
  dl.selectAll("*").remove();
  for (const [k, v] of fields) {
    dl.append("dt").text(k);
    dl.append("dd").text(String(v));
  }
}

function selectOp(key) {
  state.selected = key;
  render.soon();
  requestAnimationFrame(() => document.getElementById("detail-close").focus());
}

function draw() {
  const now = Date.now();
  const all = [...state.ops.values()].map((e) => e.obj);
  const shown = all.filter(matches);
  drawFilters(all);
  drawTimeline(shown, now);
  drawGates(now);
  drawWarnings();
  drawConnection();
  drawDetail(now);
  const active = shown.filter(isActive).length;
  const stalled = shown.filter(isStalled).length;
  document.getElementById("counts").textContent = `${shown.length} of ${all.length} operations shown: ${active} active, ${stalled} stalled, ${shown.length - active} ended.`;
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
