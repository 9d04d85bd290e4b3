// The page of `kubectl ifo ui`: watches the live API through the local server (/k8s/…) and
// draws the operations as a timeline (d3), the maintenance gates and the server's warnings.
import { select } from "d3-selection";
import { scaleTime } from "d3-scale";
import { axisTop } from "d3-axis";

const API = "/k8s/apis/live.ifo.kubevirt.io/v1alpha1";
const ROW = 22;
const GROUP_HEAD = 24;
const LABEL = 270;
const WATCH_SECONDS = 60;
/// Operations that ended while the page was open and the server no longer serves: kept at most.
const MAX_KEPT_ENDED = 2000;

const state = {
  namespace: null,
  ops: new Map(), // key → {obj, stream}
  endedHere: new Set(), // keys of operations seen ending while the page was open
  gates: new Map(),
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

/// One list+watch of a collection: lists, watches from the list's resourceVersion, resumes from
/// the last one it saw when a watch ends, relists when that is too old (410), retries with
/// backoff when the connection fails.
class Stream {
  constructor(name, path, store) {
    this.name = name;
    this.path = path;
    this.store = store; // {reset(items), apply(type, obj)}
    this.rv = null;
    this.state = "connecting";
    this.detail = "";
    this.warnings = [];
  }

  setState(state, detail = "") {
    this.state = state;
    this.detail = detail;
    render.soon();
  }

  async list() {
    const response = await fetch(this.path, { headers: { Accept: "application/json" } });
    this.warnings = warningsOf(response);
    if (!response.ok) throw new HttpError(response.status, (await response.text()).slice(0, 300));
    const list = await response.json();
    this.store.reset(list.items ?? []);
    this.rv = list.metadata?.resourceVersion ?? null;
  }

  async watch() {
    const url = `${this.path}?watch=1&allowWatchBookmarks=true&timeoutSeconds=${WATCH_SECONDS}&resourceVersion=${encodeURIComponent(this.rv)}`;
    const response = await fetch(url, { headers: { Accept: "application/json" } });
    if (response.status === 410) {
      this.rv = null;
      return;
    }
    if (!response.ok) throw new HttpError(response.status, (await response.text()).slice(0, 300));
    this.warnings = warningsOf(response);
    this.setState("live");
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (line) this.event(JSON.parse(line));
      }
    }
  }

  event(ev) {
    const obj = ev.object ?? {};
    if (ev.type === "ERROR") {
      if (obj.code === 410) this.rv = null;
      throw new Error(obj.message ?? "watch error");
    }
    if (obj.metadata?.resourceVersion) this.rv = obj.metadata.resourceVersion;
    if (ev.type !== "BOOKMARK") this.store.apply(ev.type, obj);
  }

  async run() {
    let backoff = 500;
    for (;;) {
      try {
        if (this.rv === null) await this.list();
        if (this.rv !== null) await this.watch();
        backoff = 500;
      } catch (e) {
        if (e instanceof HttpError && (e.status === 403 || e.status === 401)) {
          this.setState("forbidden", e.message);
          this.rv = null;
          await sleep(30000);
          continue;
        }
        // 410 in an ERROR event: relist at once.
        if (this.rv === null && !(e instanceof TypeError)) {
          this.setState("relisting", e.message);
          continue;
        }
        this.setState("disconnected", e.message || String(e));
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

/// How long a gate that left the list (nothing in flight any more) stays shown, with its verdict.
const CLEARED_GATE_MS = 10 * 60e3;

const gateStore = {
  reset(items) {
    state.gates = new Map(items.map((g) => [g.metadata?.name, g]));
    render.soon();
  },
  apply(type, obj) {
    const name = obj.metadata?.name;
    if (type === "DELETED") {
      // A gate leaves the list when nothing in its scope is in flight: ask for its verdict
      // rather than guess it (a gate can also be Unknown).
      this.refresh(name);
    } else {
      state.gates.set(name, obj);
    }
    render.soon();
  },
  async refresh(name) {
    try {
      const response = await fetch(`${API}/maintenancegates/${encodeURIComponent(name)}`, { headers: { Accept: "application/json" } });
      if (!response.ok) throw new Error(String(response.status));
      const gate = await response.json();
      gate.unlistedAt = Date.now();
      state.gates.set(name, gate);
    } catch {
      state.gates.delete(name);
    }
    render.soon();
  },
  prune(now) {
    for (const [name, gate] of state.gates) {
      if (gate.unlistedAt && now - gate.unlistedAt > CLEARED_GATE_MS) state.gates.delete(name);
    }
  },
};

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
  const gates = [...state.gates.values()].sort((a, b) => gateRank(a.metadata.name) - gateRank(b.metadata.name) || a.metadata.name.localeCompare(b.metadata.name));
  const items = select("#gates")
    .selectAll("li")
    .data(gates, (g) => g.metadata.name)
    .join((enter) => {
      const li = enter.append("li").attr("class", "gate");
      const head = li.append("div").attr("class", "gate-head");
      head.append("span").attr("class", "gate-name");
      head.append("span").attr("class", "verdict");
      li.append("div").attr("class", "gate-info");
      li.append("div").attr("class", "gate-message");
      return li;
    })
    .attr("data-gate", (g) => g.metadata.name)
    .attr("data-verdict", (g) => verdictOf(g).cls);
  items.select(".gate-name").text((g) => g.metadata.name);
  items
    .select(".verdict")
    .attr("class", (g) => `verdict ${verdictOf(g).cls}`)
    .text((g) => `${verdictOf(g).icon} ${verdictOf(g).word}`);
  items.select(".gate-info").text((g) => {
    const st = g.status ?? {};
    const parts = [`${st.activeOperations ?? 0} active`];
    const at = time(st.expectedClearTime);
    if (at) parts.push(at > now ? `expected clear in ~${human(at - now)}, at ${clock(at)}` : `expected clear at ${clock(at)} (overdue)`);
    else if ((st.activeOperations ?? 0) > 0) parts.push("no estimate");
    if ((g.status?.conditions ?? []).some((c) => c.type === "Stalled" && c.status === "True")) parts.push("⚠ stalled");
    return parts.join(" · ");
  });
  items.select(".gate-message").text((g) => {
    const c = (g.status?.conditions ?? []).find((c) => c.type === "Clear");
    return c && c.status !== "True" ? c.message ?? "" : "";
  });
}

function drawWarnings() {
  const texts = new Set();
  for (const s of state.streams) for (const w of s.warnings) texts.add(w);
  for (const g of state.gates.values()) {
    if (verdictOf(g).cls === "unknown") {
      const c = (g.status?.conditions ?? []).find((c) => c.type === "Clear");
      texts.add(`gate ${g.metadata.name} cannot be vouched for: ${c?.message ?? "no verdict"}`);
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
  const config = await (await fetch("/config.json")).json();
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
