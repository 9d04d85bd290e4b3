// What the page cannot vouch for, told as the server and `kubectl ifo` tell it: stale targets of
// one cause (the server may not list them, their first list is not done) are one reason, with
// its remedy, rather than one line a target and a gate (ifo-model's `group_by_cause`).

/// How the server's warnings about an incomplete answer start (ifo-model's INCOMPLETE_WARNING).
export const INCOMPLETE = "operations may be incomplete";
/// How a stale target's reason starts when it is not watched (ifo-model's NOT_WATCHED).
const NOT_WATCHED = "is not being watched: ";
/// Why a target whose first list is not done is not watched (ifo-model's FIRST_LIST_PENDING).
const FIRST_LIST_PENDING = "its first list has not completed";
/// Fewest targets of one cause told in one line (ifo-model's GROUP_FROM).
const GROUP_FROM = 4;
const REMEDY_FORBIDDEN =
  "grant the server read access to the rulesets' targets (deploy/rbac/rule-targets.yaml; `ifo-apiserver rules rbac` for your own rulesets)";

/// The cause of a stale target's reason (`forbidden`, `first-list`), or null.
function causeOf(reason) {
  if (!reason.startsWith(NOT_WATCHED)) return null;
  const why = reason.slice(NOT_WATCHED.length);
  if (why.includes("forbidden")) return "forbidden";
  if (why.includes(FIRST_LIST_PENDING)) return "first-list";
  return null;
}

/// The first three names, and how many more.
function someNames(names) {
  const shown = names.slice(0, 3).join(", ");
  return names.length > 3 ? `${shown} and ${names.length - 3} more` : shown;
}

/// A stale target told alone: its name, its reason, and the remedy when the cause has one.
function targetLine(name, reason) {
  const line = `${name} ${reason}`;
  return causeOf(reason) === "forbidden" ? `${line}. Remedy: ${REMEDY_FORBIDDEN}.` : line;
}

/// The line of a cause's targets.
function groupLine(cause, names) {
  if (cause === "forbidden") {
    return `${names.length} resource types are not being watched: the server is forbidden to list them. Remedy: ${REMEDY_FORBIDDEN}. They are ${someNames(names)}.`;
  }
  return `${names.length} resource types are being listed for the first time: what is in flight on them shows once they are. They are ${someNames(names)}.`;
}

/// A server warning's own words, without the prefix every incomplete answer's warning has.
const bare = (text) => (text.startsWith(`${INCOMPLETE}: `) ? text.slice(INCOMPLETE.length + 2) : text);
/// A warning that tells one target: `<resource>.<group>/<version> is …`.
const ONE_TARGET = /^([a-z0-9][a-z0-9.-]*\/v\d+[a-z0-9]*) (.+)$/s;
/// A warning that tells many targets of one cause.
const GROUPED = /^\d+ resource types are (not being watched: \S+ is forbidden|being listed for the first time)/;

/// The targets the page knows are stale, name → reason: those the Unknown gates list, and those
/// the server's warnings name one by one.
export function staleTargets(unknownGates, warnings) {
  const targets = new Map();
  for (const g of unknownGates) {
    for (const t of g.status?.staleTargets ?? []) if (t.resource && !targets.has(t.resource)) targets.set(t.resource, t.reason ?? "");
  }
  for (const w of warnings) {
    const m = w.startsWith(INCOMPLETE) && bare(w).match(ONE_TARGET);
    if (m && !targets.has(m[1])) targets.set(m[1], m[2]);
  }
  return targets;
}

/// The message of an Unknown gate, without what is particular to the gate (what it had in
/// flight, as last seen), so that gates Unknown for one reason are told once.
const gateReason = (message) =>
  (message || "the gate has no verdict").replace(/^cannot vouch for this scope: /, "").replace(/ \(as last seen, .*\)$/s, "");

/// Every reason the answers may be incomplete, grouped as `kubectl ifo` groups them: `lines`
/// (each a reason, the first ones the most general), and `detail` (every warning and every
/// Unknown gate, as they came).
export function reasons(warnings, unknownGates) {
  const targets = staleTargets(unknownGates, warnings);
  const byCause = new Map();
  for (const [name, reason] of targets) {
    const cause = causeOf(reason);
    if (cause) byCause.set(cause, [...(byCause.get(cause) ?? []), name]);
  }
  const grouped = new Set();
  const lines = [];
  for (const [cause, names] of byCause) {
    if (names.length < GROUP_FROM) continue;
    grouped.add(cause);
    lines.push(groupLine(cause, names.sort()));
  }
  for (const [name, reason] of targets) if (!grouped.has(causeOf(reason))) lines.push(targetLine(name, reason));
  for (const w of warnings) {
    const text = bare(w);
    // Told above, from the targets themselves.
    if (ONE_TARGET.test(text) && w.startsWith(INCOMPLETE)) continue;
    const m = text.match(GROUPED);
    if (m && grouped.has(m[1].startsWith("not") ? "forbidden" : "first-list")) continue;
    lines.push(text);
  }
  // Gates Unknown for a reason no target tells (an object over the evaluation budget…).
  const byReason = new Map();
  for (const g of unknownGates) {
    if ((g.status?.staleTargets ?? []).length) continue;
    const clear = (g.status?.conditions ?? []).find((c) => c.type === "Clear");
    const reason = gateReason(clear?.message);
    byReason.set(reason, [...(byReason.get(reason) ?? []), g.metadata.name]);
  }
  for (const [reason, gates] of byReason) lines.push(`${gates.length === 1 ? "gate" : `${gates.length} gates`} ${someNames(gates.sort())}: ${reason}`);
  const detail = [
    ...warnings.map((w) => `Warning: ${w}`),
    ...unknownGates.map((g) => {
      const clear = (g.status?.conditions ?? []).find((c) => c.type === "Clear");
      return `gate ${g.metadata.name}: ${clear?.message ?? "no verdict"}`;
    }),
  ];
  return { lines: [...new Set(lines)], detail: [...new Set(detail)], targets };
}

/// Kubernetes' default resource of a kind (apimachinery's UnsafeGuessKindToResource).
function plural(kind) {
  const k = kind.toLowerCase();
  if (!k) return k;
  if (k.endsWith("s")) return `${k}es`;
  if (k.endsWith("y") && !/[aeiou]y$/.test(k)) return `${k.slice(0, -1)}ies`;
  return `${k}s`;
}

/// The target an operation's subject is of, named as stale targets are:
/// `<resource>.<group>/<version>`, `<resource>/<version>` for the core group.
export function resourceOf(o) {
  const s = o.spec?.subject ?? {};
  const [group, version] = (s.apiVersion ?? "").includes("/") ? s.apiVersion.split("/") : ["", s.apiVersion ?? ""];
  const resource = plural(s.kind ?? "");
  return group ? `${resource}.${group}/${version}` : `${resource}/${version}`;
}
