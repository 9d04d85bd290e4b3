// One time format on the whole page: relative to now ("3m ago", "in 40s"), with the absolute
// time, 24-hour and local, on hover; the axis ticks are 24-hour clock times.

const pad = (n) => String(n).padStart(2, "0");

/// A duration: `45s`, `3m`, `3m20s`, `2h`, `2h5m`.
export function human(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${s % 60 ? (s % 60) + "s" : ""}`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${m % 60 ? (m % 60) + "m" : ""}`;
  return `${Math.floor(h / 24)}d`;
}

/// `d` from `now`: `3m ago`, `in 40s`, `now` (within a second).
export function relative(d, now) {
  const ms = d.getTime() - now;
  if (Math.abs(ms) < 1000) return "now";
  return ms < 0 ? `${human(-ms)} ago` : `in ${human(ms)}`;
}

/// 24-hour clock time: `23:28:39` (`23:28` when `short` and on the minute).
export function clock(d, short = false) {
  const hm = `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  return short && d.getSeconds() === 0 ? hm : `${hm}:${pad(d.getSeconds())}`;
}

/// The absolute time shown on hover: `2026-11-24 23:28:39` (local time).
export function absolute(d) {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${clock(d)}`;
}

/// A `<time>` element in `parent` (a d3 selection): relative text, absolute title.
export function appendTime(parent, d, now, words = (r) => r) {
  return parent
    .append("time")
    .attr("datetime", d.toISOString())
    .attr("title", absolute(d))
    .text(words(relative(d, now)));
}
