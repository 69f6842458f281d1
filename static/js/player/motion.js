/**
 * Motion between frames, shared by every view.
 *
 * A view draws frame k+1 into a fresh layer, as if nothing were on screen, and marks what
 * persists between frames with a stable key (data-key: a rank, a chunk, a micro-batch, a shard,
 * a token). swap() then joins the new layer to the old one on those keys, d3-style: a keyed mark
 * that was there before moves, grows or shrinks from where it was (its geometry transitions from
 * the old values to the new); a keyed mark that is new fades in; a transfer arrow (class
 * "transfer") draws itself from sender to receiver with a packet travelling along it; unkeyed
 * marks that did not change stay put; what left fades out with the old layer.
 *
 * finish() completes a running transition at once (a key pressed during it), so the next frame
 * always starts from a settled picture. With prefers-reduced-motion, or a duration of 0, the new
 * layer simply replaces the old one.
 */

const GEOMETRY = ['x', 'y', 'width', 'height', 'cx', 'cy', 'r', 'x1', 'y1', 'x2', 'y2', 'd', 'transform', 'points', 'stroke-width'];
const NAME = 'distdeck-motion';
const state = new WeakMap();

const reducedQuery = window.matchMedia?.('(prefers-reduced-motion: reduce)');

/** False when the user asked for reduced motion: every change is then shown at once. */
export function motionAllowed() {
  return !reducedQuery?.matches;
}

/** Set (or, for '', remove) an inline style, leaving no empty style attribute behind. */
function restore(el, prop, value) {
  if (value) el.style.setProperty(prop, value);
  else el.style.removeProperty(prop);
  if (el.getAttribute('style') === '') el.removeAttribute('style');
}

const numbers = (s) => (s.match(/-?[\d.]+(?:e-?\d+)?/g) ?? []).length;

/** A mark with no parts of its own (a tooltip <title> does not count). */
function isLeaf(el) {
  if (el.tagName === 'text') return true;
  for (const child of el.children) if (child.tagName !== 'title') return false;
  return true;
}

/** Complete `svg`'s running transition now: every mark at its end state, the old layer gone. */
export function finish(svg) {
  const s = state.get(svg);
  if (!s) return;
  state.delete(svg);
  window.clearTimeout(s.timer);
  for (const el of s.moving) window.d3.select(el).interrupt(NAME);
  for (const apply of s.ends) apply();
  s.old?.remove();
  for (const p of s.packets) p.remove();
  delete svg.dataset.animating;
}

/**
 * Replace `svg`'s frame layer by a new one drawn by `draw(layerSelection)`, animated over
 * `duration` ms. Returns the new layer's element.
 */
export function swap(svg, draw, { duration = 0 } = {}) {
  const d3 = window.d3;
  finish(svg);
  const old = svg.querySelector(':scope > g.frame-layer');
  const layer = d3.select(svg).append('g').attr('class', 'frame-layer');
  draw(layer);
  const animate = duration > 0 && old && motionAllowed();
  if (!animate) {
    old?.remove();
    return layer.node();
  }
  const ends = [];
  const moving = [];
  const packets = [];
  const oldByKey = new Map();
  for (const el of old.querySelectorAll('[data-key]')) oldByKey.set(el.getAttribute('data-key'), el);
  const oldStill = new Map(); // unkeyed leaves by their markup: unchanged ones stay still
  for (const el of old.querySelectorAll('*')) {
    if (el.hasAttribute('data-key') || !isLeaf(el) || el.closest('defs')) continue;
    const sig = el.outerHTML;
    if (!oldStill.has(sig)) oldStill.set(sig, []);
    oldStill.get(sig).push(el);
  }
  const ease = d3.easeCubicInOut;
  const fadeIn = (el) => {
    const sel = d3.select(el);
    const target = el.style.opacity;
    sel.style('opacity', 0);
    moving.push(el);
    sel.transition(NAME).duration(duration).ease(ease).style('opacity', target === '' ? 1 : target)
      .on('end', () => restore(el, 'opacity', target));
    ends.push(() => restore(el, 'opacity', target));
  };

  // A new block grows into its slot: from its left edge (grow-x) or from its base (grow-y).
  const grow = (el) => {
    const sel = d3.select(el);
    const how = el.getAttribute('data-enter');
    const t = sel.transition(NAME).duration(duration).ease(ease);
    moving.push(el);
    if (how === 'grow-y') {
      const y = el.getAttribute('y');
      const h = el.getAttribute('height');
      el.setAttribute('y', Number(y) + Number(h));
      el.setAttribute('height', 0);
      t.attr('y', y).attr('height', h);
      ends.push(() => { el.setAttribute('y', y); el.setAttribute('height', h); });
    } else {
      const w = el.getAttribute('width');
      el.setAttribute('width', 0);
      t.attr('width', w);
      ends.push(() => el.setAttribute('width', w));
    }
  };

  for (const el of layer.node().querySelectorAll('*')) {
    if (el.closest('defs') || el.tagName === 'title') continue;
    const key = el.getAttribute('data-key');
    if (key != null) {
      const before = oldByKey.get(key);
      if (before && before.tagName === el.tagName) {
        before.style.display = 'none';
        const sel = d3.select(el);
        let t = null;
        for (const attr of GEOMETRY) {
          const from = before.getAttribute(attr);
          const to = el.getAttribute(attr);
          if (from == null || to == null || from === to) continue;
          // A path with more points than before (a curve one step longer) is not a tween of it.
          if ((attr === 'd' || attr === 'points') && numbers(from) !== numbers(to)) continue;
          el.setAttribute(attr, from);
          t = t ?? sel.transition(NAME).duration(duration).ease(ease);
          t.attr(attr, to);
          ends.push(() => el.setAttribute(attr, to));
        }
        const fromFill = before.getAttribute('fill');
        const toFill = el.getAttribute('fill');
        if (fromFill && toFill && fromFill !== toFill && /^(#|rgb)/.test(fromFill) && /^(#|rgb)/.test(toFill)) {
          el.setAttribute('fill', fromFill);
          t = t ?? sel.transition(NAME).duration(duration).ease(ease);
          t.attr('fill', toFill);
          ends.push(() => el.setAttribute('fill', toFill));
        }
        if (t) moving.push(el);
      } else if (el.hasAttribute('data-enter')) {
        grow(el);
      } else if (!el.parentElement.closest('[data-key]') || !oldByKey.has(el.parentElement.closest('[data-key]').getAttribute('data-key'))) {
        fadeIn(el);
      }
      continue;
    }
    if (!isLeaf(el)) continue;
    if (el.parentElement.closest('[data-key]')) {
      // Inside a keyed group: it moves with the group; new content fades in.
      const still = oldStill.get(el.outerHTML);
      if (still?.length) { still.pop().style.display = 'none'; continue; }
      fadeIn(el);
      continue;
    }
    const still = oldStill.get(el.outerHTML);
    if (still?.length) {
      still.pop().style.display = 'none'; // the same mark in the same place: nothing to animate
      continue;
    }
    if ((el.classList.contains('transfer') || el.classList.contains('travels')) && typeof el.getTotalLength === 'function') {
      travel(el, duration, { moving, ends, packets });
      continue;
    }
    fadeIn(el);
  }

  // What is left of the old frame fades out, then goes.
  const oldSel = d3.select(old);
  oldSel.transition(NAME).duration(duration * 0.6).ease(ease).style('opacity', 0);
  moving.push(old);
  svg.dataset.animating = 'true';
  const s = { old, ends, moving, packets, timer: 0 };
  s.timer = window.setTimeout(() => { if (state.get(svg) === s) finish(svg); }, duration + 40);
  state.set(svg, s);
  return layer.node();
}

/** A transfer: the arrow draws itself from its sender to its receiver, a packet riding its tip. */
function travel(path, duration, { moving, ends, packets }) {
  const d3 = window.d3;
  let length = 0;
  try { length = path.getTotalLength(); } catch { length = 0; }
  if (!(length > 0)) return;
  const sel = d3.select(path);
  const dash = path.style.strokeDasharray;
  sel.style('stroke-dasharray', `${length} ${length}`).style('stroke-dashoffset', length);
  moving.push(path);
  sel.transition(NAME).duration(duration).ease(d3.easeCubicOut).style('stroke-dashoffset', 0)
    .on('end', () => { restore(path, 'stroke-dasharray', dash); restore(path, 'stroke-dashoffset', ''); });
  ends.push(() => { restore(path, 'stroke-dasharray', dash); restore(path, 'stroke-dashoffset', ''); });
  const packet = d3.select(path.parentNode).insert('circle', () => path.nextSibling)
    .attr('class', 'packet').attr('r', path.classList.contains('travels') ? 4 : 7).attr('pointer-events', 'none');
  if (path.classList.contains('travels')) packet.style('fill', path.getAttribute('stroke'));
  const node = packet.node();
  packets.push(node);
  moving.push(node);
  packet.transition(NAME).duration(duration).ease(d3.easeCubicOut)
    .attrTween('transform', () => (t) => {
      const p = path.getPointAtLength(t * length);
      return `translate(${p.x},${p.y})`;
    })
    .on('end', () => node.remove());
}
