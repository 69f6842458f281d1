/**
 * The pipeline view: a stage × time chart built up one logical slot per frame. Each rank is a lane;
 * each slot a column. F (forward), B (backward, or input-gradient B in zero bubble) and W (weight
 * gradient) boxes carry their micro-batch and grow into their slot; empty slots are shaded as
 * bubble. The current slot's sends are arrows to the receiving rank, a packet riding each. On the
 * right, each rank's micro-batches in flight (forward done, backward not yet) and the bytes of
 * activations they hold, measured. Keys: rank/slot.
 */
import { bytes } from '../format.js';
import { fit, textWidth } from './layout.js';

const LABEL = 18;
const KIND = {
  F: { fill: 'var(--accent, #5cc8ff)', label: 'F forward' },
  B: { fill: 'var(--role-grads, #7ee07e)', label: 'B backward' },
  W: { fill: 'var(--role-optimizer, #ffb454)', label: 'W weight grad' },
};
const NAMES = {
  gpipe: 'GPipe',
  '1f1b': '1F1B',
  interleaved_1f1b: 'Interleaved 1F1B',
  zero_bubble: 'Zero bubble (ZB-H1)',
};
const FORMULA = {
  gpipe: '(p−1)/(m+p−1)',
  '1f1b': '(p−1)/(m+p−1)',
  interleaved_1f1b: '(p−1)/(v·m+p−1)',
  zero_bubble: '(p−1)/(3m+p−1)',
};

function pct(x) {
  return `${(100 * x).toFixed(1)}%`;
}

export function render(svg, { frames, index, frame, summary, size }) {
  const d3 = window.d3;
  const { width: W, height: H } = size;
  const info = frames[0]?.extra ?? {};
  if (info.slots == null || !frame) return;
  const n = frame.ranks.length;
  const T = info.slots;
  const upTo = frames.slice(0, index + 1).filter((f) => f.phase === 'slot');
  const current = frame.phase === 'slot' ? frame.extra.slot : frame.phase === 'done' ? T : -1;
  const narrow = W < 760;

  const left = textWidth(narrow ? 'r0' : 'rank 0', LABEL) + 16;
  const right = narrow ? textWidth('held', LABEL) + 16 : textWidth('8 · 1.02 kB', LABEL) + 24;
  const top = 34;
  const kinds = info.schedule === 'zero_bubble' ? ['F', 'B', 'W'] : ['F', 'B'];
  const legendRows = narrow ? 2 : 1;
  const bottom = 12 + legendRows * (LABEL + 10) + LABEL + 10;
  const chartRight = W - right;
  const x = d3.scaleLinear().domain([0, T]).range([left, chartRight - 8]);
  const cell = x(1) - x(0);
  const lane = (H - top - bottom) / n;
  const y = (r) => top + r * lane;
  const boxH = lane * 0.74;
  const boxY = (r) => y(r) + (lane - boxH) / 2;

  // Header: the schedule and its length (where we are is the deck's step counter and the caption, not a third counter).
  const v = info.virtual_stages > 1 ? ` · v = ${info.virtual_stages}` : '';
  svg.append('text').attr('x', left).attr('y', 24).attr('class', 'rank-title')
    .text(`${NAMES[info.schedule] ?? info.schedule}: p = ${info.stages} · m = ${info.microbatches}${v}`);
  svg.append('text').attr('x', chartRight - 8).attr('y', 24).attr('text-anchor', 'end').attr('class', 'lane-label')
    .text(`${T} slots`);

  // Lanes.
  svg.append('g').selectAll('text').data(d3.range(n)).join('text')
    .attr('class', 'lane-label').attr('x', 6).attr('y', (r) => y(r) + lane / 2 + LABEL * 0.35)
    .text((r) => (narrow ? `r${r}` : `rank ${r}`));
  svg.append('g').selectAll('line').data(d3.range(n + 1)).join('line')
    .attr('class', 'lane-rule').attr('x1', left).attr('x2', chartRight - 8).attr('y1', y).attr('y2', y);

  // The chart so far: one box per rank per slot, bubbles shaded.
  const defs = svg.append('defs');
  defs.append('pattern').attr('id', 'pp-bubble').attr('width', 8).attr('height', 8)
    .attr('patternUnits', 'userSpaceOnUse').attr('patternTransform', 'rotate(45)')
    .append('rect').attr('width', 3).attr('height', 8).attr('fill', 'var(--rule, #444)');
  defs.append('marker').attr('id', 'pp-arrow').attr('viewBox', '0 0 10 10').attr('refX', 9).attr('refY', 5)
    .attr('markerWidth', 6).attr('markerHeight', 6).attr('orient', 'auto')
    .append('path').attr('d', 'M0,0L10,5L0,10z').attr('class', 'sim-arrowhead');
  const cells = upTo.flatMap((f) => f.ranks.map((s) => ({ rank: s.rank, slot: f.extra.slot, action: s.extra.action })));
  const g = svg.append('g').selectAll('g').data(cells).join('g')
    .attr('class', (c) => `pp-cell${c.slot === current ? ' current' : ''}`);
  g.append('rect').attr('data-key', (c) => `cell-${c.rank}-${c.slot}`).attr('data-enter', 'grow-x')
    .attr('x', (c) => x(c.slot) + 0.5).attr('width', Math.max(1, cell - 1.5))
    .attr('y', (c) => boxY(c.rank)).attr('height', boxH).attr('rx', Math.min(3, cell / 4))
    .attr('fill', (c) => (c.action ? KIND[c.action.kind].fill : 'url(#pp-bubble)'))
    .attr('fill-opacity', (c) => (c.action ? (c.action.chunk % 2 ? 0.62 : 1) : 0.8))
    .attr('stroke', (c) => (c.slot === current ? 'var(--fg, #eee)' : 'none')).attr('stroke-width', 2)
    .append('title').text((c) => (c.action
      ? `rank ${c.rank}, slot ${c.slot + 1}: ${c.action.kind} of micro-batch ${c.action.mb}, stage ${c.action.stage}`
      : `rank ${c.rank}, slot ${c.slot + 1}: idle (bubble)`));
  if (boxH >= LABEL + 2) {
    const label = (c) => {
      const full = `${c.action.kind}${c.action.mb}`;
      if (textWidth(full, LABEL) + 6 <= cell) return full;
      return textWidth(String(c.action.mb), LABEL) + 4 <= cell ? String(c.action.mb) : '';
    };
    g.filter((c) => c.action).append('text')
      .attr('x', (c) => x(c.slot) + cell / 2).attr('y', (c) => boxY(c.rank) + boxH / 2 + LABEL * 0.35)
      .attr('text-anchor', 'middle').style('font-size', `${LABEL}px`).style('fill', 'var(--bg, #111)')
      .text(label);
  }

  // This slot's messages: from the end of the sender's box to the receiver's next slot.
  if (frame.phase === 'slot') {
    const sends = frame.transfers.filter((t) => t.op === 'send' && t.dst != null);
    const arrows = svg.append('g').attr('class', 'transfers');
    sends.forEach((t) => {
      const x1 = x(current + 1) - 2;
      const x2 = x(current + 1) + Math.max(10, Math.min(cell, 40) * 0.8);
      const down = t.dst > t.src;
      const y1 = boxY(t.src) + (down ? boxH : 0);
      const y2 = boxY(t.dst) + (down ? 0 : boxH);
      arrows.append('path').attr('class', 'transfer')
        .attr('d', `M${x1},${y1} C${x1 + 20},${y1} ${x2},${(y1 + y2) / 2} ${x2},${y2}`)
        .attr('marker-end', 'url(#pp-arrow)')
        .append('title').text(`${t.tensor}: ${bytes(t.bytes)}`);
      const lx = Math.min(x2 + 12, chartRight - textWidth('1.02 kB', LABEL) - 4);
      arrows.append('text').attr('class', 'transfer-label')
        .attr('x', lx).attr('y', (y1 + y2) / 2 + LABEL * 0.35)
        .text(`${t.tensor?.startsWith('grad') ? '∂ ' : ''}${bytes(t.bytes)}`);
    });
  }

  // Micro-batches in flight per rank, measured: count and bytes of held activations.
  const held = frame.ranks.map((s) => ({ rank: s.rank, count: s.extra.in_flight ?? 0, bytes: s.extra.in_flight_bytes ?? 0 }));
  const maxBytes = d3.max(frames, (f) => d3.max(f.ranks, (s) => s.extra.in_flight_bytes ?? 0)) || 1;
  const barX = chartRight + 4;
  const barW = right - 12;
  svg.append('text').attr('x', barX).attr('y', 24).attr('class', 'lane-label').text('held')
    .append('title').text('micro-batches in flight on each rank (forward done, backward not yet) and their activations');
  const bars = svg.append('g').selectAll('g').data(held).join('g');
  bars.append('rect').attr('data-key', (h) => `held-${h.rank}`).attr('x', barX)
    .attr('y', (h) => y(h.rank) + lane / 2 + 4)
    .attr('width', (h) => (barW * h.bytes) / maxBytes).attr('height', Math.max(4, Math.min(12, lane * 0.25)))
    .attr('fill', 'var(--role-activations, #c792ea)')
    .append('title').text((h) => `rank ${h.rank}: ${h.count} micro-batches in flight, ${bytes(h.bytes)} of activations`);
  bars.append('text').attr('class', 'bar-total').attr('x', barX).attr('y', (h) => y(h.rank) + lane / 2)
    .text((h) => (narrow ? `${h.count}` : `${h.count} · ${bytes(h.bytes)}`));

  // Legend and the bubble so far (counted on the frames), with the formula once the run is done.
  const idle = cells.filter((c) => !c.action).length;
  const legendY = H - bottom + 12 + LABEL;
  const legend = svg.append('g').attr('transform', `translate(${left},${legendY})`);
  const items = [...kinds.map((k) => [KIND[k].fill, KIND[k].label]), ['url(#pp-bubble)', 'bubble']];
  let lx = 0;
  let ly = 0;
  for (const [fill, text] of items) {
    const w = 26 + textWidth(text, LABEL) + 20;
    if (lx + w > W - left && lx > 0) { lx = 0; ly += LABEL + 10; }
    legend.append('rect').attr('x', lx).attr('y', ly - 15).attr('width', 18).attr('height', 18).attr('fill', fill);
    legend.append('text').attr('class', 'legend-label').attr('x', lx + 24).attr('y', ly).text(text);
    lx += w;
  }
  if (info.virtual_stages > 1 && !narrow) {
    legend.append('text').attr('class', 'legend-label').attr('x', lx).attr('y', ly).text('darker: second chunk');
  }
  // The "held" note goes when the pane is too narrow for it (the column is headed "held"): a whole
  // sentence rather than one cut off with an ellipsis.
  const bubbleSoFar = `bubble so far: ${idle} of ${cells.length} rank-slots idle`;
  const withHeld = `${bubbleSoFar} · held: micro-batches in flight`;
  let line = cells.length ? (textWidth(withHeld, LABEL) <= W - left - 8 ? withHeld : bubbleSoFar) : '';
  const fig = summary?.figures;
  if (fig && current >= T - 1) {
    line = `bubble ${pct(fig.bubble_fraction_slots)} measured · ${FORMULA[info.schedule]} = ${pct(fig.bubble_fraction_formula)}`;
  }
  svg.append('text').attr('class', 'lane-label').attr('x', left).attr('y', H - 8)
    .text(fit(line, W - left - 8, LABEL));
  svg.attr('data-slots', upTo.length).attr('data-bubbles', idle);
}
