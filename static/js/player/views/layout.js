/**
 * Text layout shared by the views: how wide a label will be, cutting one to fit its room, and a
 * last pass that keeps labels from printing over each other.
 */

// Source Sans Pro (and its Helvetica/Arial fallbacks) average a little over half an em per glyph.
const EM_PER_CHAR = 0.54;

/** About how wide `text` is at `size` px. */
export function textWidth(text, size) {
  return String(text ?? '').length * size * EM_PER_CHAR;
}

/** `text`, cut with an ellipsis to fit `width` px at `size` px. */
export function fit(text, width, size) {
  const s = String(text ?? '');
  if (textWidth(s, size) <= width) return s;
  const keep = Math.max(0, Math.floor(width / (size * EM_PER_CHAR)) - 1);
  return keep > 0 ? `${s.slice(0, keep)}…` : '';
}

/**
 * Hide every label that would print over one drawn before it (the earlier a label is drawn, the
 * more it matters); what a hidden label said stays in its mark's tooltip. Labels marked
 * data-keep are never hidden. Works on the laid-out layer, so it sees the real glyph boxes.
 */
export function declutter(layer, slack = 0.5) {
  // Every box read before any label goes: removing one between reads would lay the view out again for
  // the next read (a forced layout per hidden label). An SVG label's box does not depend on the others.
  const texts = Array.from(layer.querySelectorAll('text')).filter((text) => text.textContent.trim());
  const rects = texts.map((text) => text.getBoundingClientRect());
  const empty = (r) => r.width === 0 && r.height === 0;
  if (rects.length && rects.every(empty)) return; // not laid out (a hidden slide): nothing to measure
  const boxes = [];
  const drop = [];
  texts.forEach((text, i) => {
    const r = rects[i];
    if (empty(r)) return; // a label not shown covers nothing
    const box = { l: r.left + slack, r: r.right - slack, t: r.top + slack, b: r.bottom - slack };
    const hit = boxes.some((o) => box.l < o.r && o.l < box.r && box.t < o.b && o.t < box.b);
    if (hit && !text.hasAttribute('data-keep')) drop.push(text);
    else boxes.push(box);
  });
  for (const text of drop) text.remove();
  layer.setAttribute('data-hidden-labels', drop.length);
}
