/**
 * The ring view (ring attention): the ranks on a ring with the Q chunks each keeps and the K/V
 * block it holds at this step, the block transfers to the right neighbour with their bytes; the
 * attention matrix (query chunk x key chunk) with the tiles computed so far in this pass, coloured
 * by the rank that computed them (causally masked tiles empty, skipped ones dashed); and, per
 * rank, this step's compute span against the K/V transfer that was in flight meanwhile.
 */
import { bytes, ms } from '../format.js';
import { fit } from './layout.js';

const LABEL = 18;

function tilesOfPass(frames, index, frame) {
  // The step frames of the pass this frame belongs to, up to this one (all of it for merged/grads).
  let pass = frame.extra?.pass;
  const upTo = index;
  if (frame.phase === 'merged') pass = 'forward';
  if (frame.phase === 'grads') pass = 'backward';
  if (!pass) return [];
  const tiles = [];
  frames.slice(0, upTo + 1).forEach((f) => {
    if (f.extra?.pass !== pass) return;
    for (const s of f.ranks) {
      for (const t of s.extra.tiles ?? []) tiles.push({ ...t, rank: s.rank, current: f.index === index });
    }
  });
  return tiles;
}

export function render(svg, { frames, index, frame, size }) {
  const d3 = window.d3;
  const { width: W, height: H } = size;
  const layout = frames[0]?.extra ?? {};
  if (layout.chunks == null) return;
  const n = frame.ranks.length;
  // Three columns drawn for the pane: the ring, the attention matrix, the per-rank step lanes.
  const ringW = W * 0.36;
  const RING = { cx: ringW / 2 + 4, cy: (H + 30) / 2, r: Math.max(60, Math.min(ringW / 2 - 70, (H - 30) / 2 - 50)) };
  const msize = Math.max(120, Math.min(W * 0.3, H - 90));
  const MATRIX = { x: ringW + 44, y: 62, size: msize };
  const LANES = { x: MATRIX.x + msize + 24, w: Math.max(120, W - (MATRIX.x + msize + 24) - 10) };
  const color = d3.scaleOrdinal(d3.schemeTableau10).domain(d3.range(8));
  const owner = new Map();
  layout.chunks_of_rank.forEach((cs, r) => cs.forEach((c) => owner.set(c, r)));
  const isStep = frame.extra?.pass != null;
  const list = (cs) => cs.map((c) => `c${c}`).join(',');

  // The ring.
  const defs = svg.append('defs');
  defs.append('marker').attr('id', 'ring-arrow').attr('viewBox', '0 0 10 10').attr('refX', 9).attr('refY', 5)
    .attr('markerWidth', 7).attr('markerHeight', 7).attr('orient', 'auto')
    .append('path').attr('d', 'M0,0L10,5L0,10z').attr('class', 'sim-arrowhead');
  const at = (r, radius = RING.r) => {
    const a = -Math.PI / 2 + (2 * Math.PI * r) / n;
    return [RING.cx + radius * Math.cos(a), RING.cy + radius * Math.sin(a)];
  };
  const nodeR = Math.max(24, Math.min(58, (Math.PI * RING.r) / n - 8));
  const roomy = nodeR >= 50; // room for the Q chunks as well as the K/V ones
  const arrows = svg.append('g').attr('class', 'transfers');
  const sends = d3.group(frame.transfers.filter((t) => t.dst != null), (t) => t.src);
  for (let r = 0; r < n; r += 1) {
    const [x1, y1] = at(r);
    const [x2, y2] = at((r + 1) % n);
    const len = Math.hypot(x2 - x1, y2 - y1);
    const ux = (x2 - x1) / len;
    const uy = (y2 - y1) / len;
    const sent = sends.get(r) ?? [];
    arrows.append('line').attr('class', sent.length ? 'transfer' : 'lane-rule').attr('data-at', sent.length ? frame.index : null)
      .attr('x1', x1 + ux * (nodeR + 3)).attr('y1', y1 + uy * (nodeR + 3))
      .attr('x2', x2 - ux * (nodeR + 3)).attr('y2', y2 - uy * (nodeR + 3))
      .attr('marker-end', sent.length ? 'url(#ring-arrow)' : null);
    // Outside the ring, beside its hop: the bytes that crossed it at this step.
    const [lx, ly] = at(r + 0.5, RING.r + 22);
    const labels = sent.length ? [bytes(d3.sum(sent, (t) => t.bytes))] : [];
    labels.forEach((text) => {
      arrows.append('text').attr('class', 'transfer-label').attr('x', lx).attr('y', ly + 6)
        .attr('text-anchor', 'middle').text(text)
        .append('title').text(sent.map((t) => `${t.tensor ?? t.op}: ${bytes(t.bytes)}`).join(', '));
    });
  }
  const nodes = svg.append('g').attr('class', 'ring-nodes').selectAll('g').data(frame.ranks).join('g')
    .attr('data-key', (s) => `ring-${s.rank}`).attr('transform', (s) => `translate(${at(s.rank).join(',')})`);
  nodes.append('circle').attr('r', nodeR).attr('class', 'rank-box').style('stroke', (s) => color(s.rank)).style('stroke-width', 3);
  const lines = roomy ? 3 : nodeR >= 34 ? 2 : 1;
  const y0 = -((lines - 1) * 24) / 2 + 7;
  nodes.append('text').attr('class', 'rank-title').attr('text-anchor', 'middle').attr('y', y0)
    .text((s) => `r${s.rank}`);
  const kvText = (s) => (isStep ? `KV ${list(s.extra.kv_chunks)}` : `KV ${list(layout.chunks_of_rank[s.rank])}`);
  if (lines === 3) {
    nodes.append('text').attr('class', 'tensor-note').attr('text-anchor', 'middle').attr('y', y0 + 24)
      .text((s) => fit(`Q ${list(layout.chunks_of_rank[s.rank])}`, 2 * nodeR - 8, LABEL));
  }
  if (lines >= 2) {
    // The K/V block a rank holds, in the colour of the rank it came from: it visibly moves round.
    nodes.append('text').attr('class', 'tensor-note').attr('text-anchor', 'middle').attr('y', y0 + 24 * (lines - 1))
      .style('fill', (s) => (isStep ? color(s.extra.holds) : null))
      .text((s) => fit(kvText(s), 2 * nodeR - 8, LABEL));
  }
  nodes.append('title').text((s) => `rank ${s.rank}: Q ${list(layout.chunks_of_rank[s.rank])}; ${kvText(s)}`);
  svg.append('text').attr('class', 'legend-label').attr('x', 8).attr('y', 22)
    .text(fit(isStep ? `${frame.extra.pass} step ${frame.extra.step + 1}/${frame.extra.steps}: K/V move one rank on`
      : `${layout.chunks} chunks of ${layout.chunk_len} tokens${layout.zigzag ? ', zig-zag' : ''}`, ringW - 8, LABEL));

  // The attention matrix: rows = query chunks, columns = key/value chunks.
  const C = layout.chunks;
  const cell = MATRIX.size / C;
  const m = svg.append('g').attr('class', 'attention').attr('transform', `translate(${MATRIX.x},${MATRIX.y})`);
  m.append('text').attr('class', 'legend-label').attr('x', -30).attr('y', -40)
    .text(fit(`query ↓ × K/V →${layout.causal ? ', causal' : ''}`, MATRIX.size + 30, LABEL));
  for (let i = 0; i < C; i += 1) {
    for (let j = 0; j < C; j += 1) {
      if (layout.causal && j > i) continue; // masked: never computed by anyone
      const path = layout.causal && i === j
        ? `M${j * cell},${i * cell}L${j * cell},${(i + 1) * cell}L${(j + 1) * cell},${(i + 1) * cell}Z`
        : `M${j * cell},${i * cell}h${cell}v${cell}h${-cell}Z`;
      m.append('path').attr('d', path).attr('fill', 'none').attr('stroke', 'var(--rule)');
    }
  }
  for (const t of tilesOfPass(frames, index, frame)) {
    const x = t.kv * cell;
    const y = t.q * cell;
    if (t.kind === 'skip') {
      if (t.current) {
        m.append('rect').attr('x', x + 2).attr('y', y + 2).attr('width', cell - 4).attr('height', cell - 4)
          .attr('fill', 'none').attr('stroke', color(t.rank)).attr('stroke-dasharray', '3 3')
          .append('title').text(`rank ${t.rank} skips q c${t.q} × kv c${t.kv}: masked entirely`);
      }
      continue;
    }
    const path = t.kind === 'diagonal'
      ? `M${x},${y}L${x},${y + cell}L${x + cell},${y + cell}Z`
      : `M${x},${y}h${cell}v${cell}h${-cell}Z`;
    m.append('path').attr('d', path).attr('fill', color(t.rank)).attr('opacity', t.current ? 0.95 : 0.35)
      .append('title').text(`rank ${t.rank}: q c${t.q} × kv c${t.kv} (${t.kind})`);
  }
  for (let c = 0; c < C; c += 1) {
    m.append('text').attr('class', 'lane-label').attr('x', -6).attr('y', c * cell + cell / 2 + 4).attr('text-anchor', 'end')
      .style('fill', color(owner.get(c))).text(cell >= 22 ? `c${c}` : '');
    m.append('text').attr('class', 'lane-label').attr('x', c * cell + cell / 2).attr('y', -8).attr('text-anchor', 'middle')
      .style('fill', color(owner.get(c))).text(cell >= 30 ? `c${c}` : '');
    m.append('rect').attr('x', -4).attr('y', c * cell + 1).attr('width', 3).attr('height', cell - 2).attr('fill', color(owner.get(c)));
  }

  // Per rank, this step: the compute span and the K/V transfer in flight, on the step's own clock.
  const spans = frame.spans.filter((s) => s.kind === 'compute');
  const flights = frame.transfers.filter((t) => (t.tensor ?? '').startsWith('kv'));
  const times = [...spans.flatMap((s) => [s.start, s.end]), ...flights.flatMap((t) => [t.start, t.end])];
  const lane = (H - 70) / n;
  const lanes = svg.append('g').attr('class', 'step-lanes').attr('transform', `translate(${LANES.x},62)`);
  if (isStep) {
    lanes.append('rect').attr('x', 0).attr('y', -50).attr('width', 14).attr('height', 14).attr('fill', 'var(--accent)');
    lanes.append('text').attr('class', 'legend-label').attr('x', 20).attr('y', -38).text('compute');
    lanes.append('rect').attr('x', 0).attr('y', -28).attr('width', 14).attr('height', 14).attr('fill', 'var(--accent-strong)');
    lanes.append('text').attr('class', 'legend-label').attr('x', 20).attr('y', -16).text('K/V in flight');
  }
  if (isStep && times.length) {
    const x = d3.scaleLinear().domain([d3.min(times), d3.max(times)]).range([0, LANES.w]);
    for (const s of frame.ranks) {
      const y = s.rank * lane;
      const kinds = (s.extra.tiles ?? []).map((t) => t.kind);
      const computed = kinds.filter((k) => k !== 'skip').length;
      lanes.append('text').attr('class', 'tensor-note').attr('x', 0).attr('y', y + 16).style('fill', color(s.rank))
        .text(fit(`r${s.rank} · KV ${s.extra.holds} · ${computed}/${kinds.length} tiles`, LANES.w, LABEL));
      const barH = Math.max(3, Math.min(10, (lane - 26) / 2));
      for (const sp of spans.filter((q) => q.rank === s.rank)) {
        lanes.append('rect').attr('x', x(sp.start)).attr('y', y + 22).attr('height', barH)
          .attr('width', Math.max(1.5, x(sp.end) - x(sp.start))).attr('fill', 'var(--accent)')
          .append('title').text(`${sp.name}: ${ms(sp.end - sp.start)}`);
      }
      for (const t of flights.filter((q) => q.src === s.rank)) {
        lanes.append('rect').attr('x', x(t.start)).attr('y', y + 23 + barH).attr('height', barH)
          .attr('width', Math.max(1.5, x(t.end) - x(t.start))).attr('fill', 'var(--accent-strong)')
          .append('title').text(`${t.tensor} → r${t.dst}: ${bytes(t.bytes)}, ${ms(t.end - t.start)} in flight`);
      }
    }
  }
  svg.attr('data-phase', frame.phase)
    .attr('aria-label', `Ring attention on ${n} ranks: ${frame.caption}`);
}
