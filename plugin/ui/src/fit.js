// Text that fits a width: measured with the page's font, cut in the middle ("VirtualMachineIn…
// demo/vm-0") so both the kind and the name's end stay readable; the full text goes in a title.

const canvas = typeof document !== "undefined" ? document.createElement("canvas").getContext("2d") : null;
const cache = new Map();
const MAX_CACHED = 20000;

/// The width of `text` in `font` (a CSS font shorthand), in pixels.
export function textWidth(text, font) {
  const key = `${font}\u0000${text}`;
  let w = cache.get(key);
  if (w === undefined) {
    canvas.font = font;
    w = canvas.measureText(text).width;
    if (cache.size > MAX_CACHED) cache.clear();
    cache.set(key, w);
  }
  return w;
}

/// `text` cut in the middle with `…` so it is at most `width` pixels wide in `font`.
export function fitMiddle(text, width, font) {
  if (width <= 0) return "";
  if (textWidth(text, font) <= width) return text;
  let keep = Math.max(1, Math.floor((text.length * width) / textWidth(text, font)) - 1);
  for (; keep > 1; keep--) {
    const head = Math.ceil(keep * 0.55);
    const cut = `${text.slice(0, head)}…${text.slice(text.length - (keep - head))}`;
    if (textWidth(cut, font) <= width) return cut;
  }
  return "…";
}
