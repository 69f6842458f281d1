/**
 * The tokens view (expert parallelism): every token on its rank (left), the experts on their
 * ranks (right), a line for each routing decision (dashed red when capacity dropped it), real
 * token counts per expert against the capacity, and during the all-to-alls the matrix of bytes
 * each rank sent to each other rank. Everything comes from the frames' rank extras.
 */
import { bytes } from '../format.js';
import { fit } from './layout.js';

const TOP = 34;
const LABEL = 18;

const PHASES = ['tokens', 'route', 'counts', 'dispatch', 'experts', 'combine', 'output'];

function latest(frames, index, phase) {
  for (let i = Math.min(index, frames.length - 1); i >= 0; i -= 1) if (frames[i].phase === phase) return frames[i];
  return null;
}

export function render(svg, { frames, index, frame, size: pane }) {
  const d3 = window.d3;
  const { width: W, height: H0 } = pane;
  const H = H0 - 28; // the capacity line's label sits under the bars
  // Tokens on the left, experts on the right, the all-to-all matrix between them when it runs.
  const TOKENS_X = [8, W * 0.3];
  const EXPERTS_X = [W * 0.64, W - 8];
  const msize = Math.max(140, Math.min(W * 0.22, H - 120));
  const MATRIX = { x: (TOKENS_X[1] + EXPERTS_X[0]) / 2 - msize / 2 + 10, y: 80, size: msize };
  const layout = frames[0]?.extra ?? {};
  if (layout.experts == null) return;
  const n = frame.ranks.length;
  const E = layout.experts;
  const T = layout.tokens_per_rank;
  const cap = layout.capacity;
  const rankColor = d3.scaleOrdinal(d3.schemeTableau10).domain(d3.range(8));
  const step = PHASES.indexOf(frame.phase);
  const route = step >= 1 ? latest(frames, index, 'route') : null;
  const experts = step >= 4 ? latest(frames, index, 'experts') : null;

  // Tokens: one band per rank, a square per token, coloured by what the router did to it.
  const band = (H - TOP - 8) / n;
  const perRow = Math.max(1, Math.min(T, 16));
  const rows = Math.ceil(T / perRow);
  const size = Math.max(3, Math.min(24, (TOKENS_X[1] - TOKENS_X[0] - 40) / perRow, (band - 6) / rows));
  const tokenAt = (t) => {
    const r = Math.floor(t / T);
    const i = t % T;
    return { x: TOKENS_X[0] + 34 + (i % perRow) * size, y: TOP + r * band + 3 + Math.floor(i / perRow) * size };
  };
  const routes = route ? route.ranks.flatMap((s) => s.extra.routes ?? []) : [];
  const fate = new Map(routes.map((d) => [d.token, d.kept.every(Boolean) ? 'kept' : d.kept.some(Boolean) ? 'partial' : 'dropped']));

  svg.append('text').attr('class', 'legend-label').attr('x', TOKENS_X[0]).attr('y', 20)
    .text(`${n * T} tokens, ${T} per rank`);
  svg.append('text').attr('class', 'legend-label').attr('x', EXPERTS_X[0]).attr('y', 20)
    .text(fit(`${E} experts · capacity ${cap} per rank each`, EXPERTS_X[1] - EXPERTS_X[0], LABEL));
  const tokens = svg.append('g').attr('class', 'tokens');
  for (let r = 0; r < n; r += 1) {
    tokens.append('text').attr('class', 'lane-label').attr('x', TOKENS_X[0]).attr('y', TOP + r * band + Math.min(band, size * rows) / 2 + 5)
      .style('fill', rankColor(r)).text(`r${r}`);
  }
  tokens.selectAll('rect').data(d3.range(n * T)).join('rect').attr('data-key', (t) => `tok-${t}`)
    .attr('x', (t) => tokenAt(t).x).attr('y', (t) => tokenAt(t).y)
    .attr('width', size - 1).attr('height', size - 1).attr('rx', 2)
    .attr('fill', (t) => ({ kept: 'var(--accent)', partial: 'var(--accent-strong)', dropped: 'var(--danger)' }[fate.get(t)] ?? 'var(--fg-muted)'))
    .append('title').text((t) => {
      const d = routes.find((x) => x.token === t);
      return d ? `token ${t}: ${d.experts.map((e, k) => `E${e} (gate ${d.gates[k]}${d.kept[k] ? '' : ', dropped'})`).join(', ')}` : `token ${t}`;
    });

  // Experts: a bar per expert, grouped by the rank that owns it; kept tokens, then the dropped overflow.
  const eh = (H - TOP - 8) / E;
  const ey = (e) => TOP + e * eh;
  const kept = new Array(E).fill(0);
  const wanted = new Array(E).fill(0);
  if (route) {
    for (const s of route.ranks) {
      (s.extra.sent ?? []).forEach((c, e) => { kept[e] += c; });
      (s.extra.wanted ?? []).forEach((c, e) => { wanted[e] += c; });
    }
  }
  const done = new Array(E).fill(null);
  if (experts) {
    const per = E / n;
    experts.ranks.forEach((s) => (s.extra.tokens_per_expert ?? []).forEach((c, j) => { done[s.rank * per + j] = c; }));
  }
  const maxCount = Math.max(n * cap, d3.max(wanted) ?? 0, 1);
  const bx = d3.scaleLinear().domain([0, maxCount]).range([EXPERTS_X[0] + 70, EXPERTS_X[1] - 70]);
  const g = svg.append('g').attr('class', 'experts');
  for (let e = 0; e < E; e += 1) {
    const owner = layout.expert_rank[e];
    const y = ey(e);
    const h = Math.max(2, eh - 3);
    g.append('rect').attr('x', EXPERTS_X[0]).attr('y', y).attr('width', 64).attr('height', h).attr('rx', 3)
      .attr('fill', rankColor(owner)).attr('opacity', 0.85);
    if (eh >= LABEL + 2) {
      g.append('text').attr('class', 'span-label').attr('x', EXPERTS_X[0] + 4).attr('y', y + h / 2 + LABEL * 0.35)
        .text(`E${e} r${owner}`);
    }
    if (!route) continue;
    g.append('rect').attr('data-key', `kept-${e}`).attr('data-enter', 'grow-x').attr('x', bx(0)).attr('y', y).attr('width', bx(kept[e]) - bx(0)).attr('height', h)
      .attr('fill', 'var(--accent)').attr('opacity', done[e] != null ? 1 : 0.6)
      .append('title').text(`E${e}: ${kept[e]} tokens kept, ${wanted[e] - kept[e]} dropped`);
    g.append('rect').attr('data-key', `dropped-${e}`).attr('x', bx(kept[e])).attr('y', y).attr('width', bx(wanted[e]) - bx(kept[e])).attr('height', h)
      .attr('fill', 'var(--danger)').attr('opacity', 0.7);
    if (eh >= LABEL + 2) {
      g.append('text').attr('class', 'bar-total').attr('x', bx(wanted[e]) + 4).attr('y', y + h / 2 + LABEL * 0.35)
        .text(`${done[e] ?? kept[e]}${wanted[e] > kept[e] ? ` (−${wanted[e] - kept[e]})` : ''}`);
    }
  }
  g.append('line').attr('class', 'lane-rule').attr('x1', bx(n * cap)).attr('x2', bx(n * cap))
    .attr('y1', TOP - 4).attr('y2', H - 4).attr('stroke-dasharray', '4 3');
  g.append('text').attr('class', 'legend-label').attr('x', bx(n * cap)).attr('y', H + 20).attr('text-anchor', 'middle')
    .text(`N·C = ${n * cap}`);

  const allToAll = frame.phase === 'dispatch' || frame.phase === 'combine';
  // Routing lines: token -> expert, one per top-k choice; faded behind the all-to-all matrix.
  if (route) {
    const lines = svg.insert('g', '.tokens').attr('class', 'routes') // under the tokens they leave from
     .attr('opacity', allToAll ? 0.12 : 1);
    const many = routes.length * (routes[0]?.experts.length ?? 1) > 160;
    for (const d of routes) {
      const a = tokenAt(d.token);
      d.experts.forEach((e, k) => {
        // Routed (and dispatched) tokens travel to their expert; at the combine they travel back.
        const mid = (TOKENS_X[1] + EXPERTS_X[0]) / 2;
        const [p0, p1] = [[a.x + size, a.y + size / 2], [EXPERTS_X[0], ey(e) + eh / 2]];
        const [from, to] = frame.phase === 'combine' ? [p1, p0] : [p0, p1];
        const moves = d.kept[k] && ['route', 'dispatch', 'combine'].includes(frame.phase);
        lines.append('path').attr('class', moves ? 'travels' : null).attr('data-at', moves ? frame.index : null)
          .attr('d', `M${from[0]},${from[1]} C${mid},${from[1]} ${mid},${to[1]} ${to[0]},${to[1]}`)
          .attr('fill', 'none')
          .attr('stroke', d.kept[k] ? rankColor(layout.expert_rank[e]) : 'var(--danger)')
          .attr('stroke-dasharray', d.kept[k] ? null : '4 3')
          .attr('stroke-width', many ? 0.6 : 1.2 + 1.5 * d.gates[k])
          .attr('opacity', many ? 0.35 : 0.75);
      });
    }
  }

  // The all-to-all, as a matrix: row = sending rank, column = receiving rank, real bytes.
  if (allToAll) {
    const m = frame.ranks.map((s) => s.extra.send_bytes ?? []);
    const cell = MATRIX.size / n;
    const heat = d3.scaleSequential(d3.interpolateBlues).domain([0, d3.max(m.flat()) || 1]);
    const mg = svg.append('g').attr('class', 'all-to-all').attr('transform', `translate(${MATRIX.x},${MATRIX.y})`);
    mg.append('rect').attr('x', -40).attr('y', -70).attr('width', MATRIX.size + 56).attr('height', MATRIX.size + 130)
      .attr('fill', 'var(--bg-raised)').attr('stroke', 'var(--rule)').attr('rx', 6);
    mg.append('text').attr('class', 'tensor-name').attr('x', -30).attr('y', -46)
      .text(fit(`${frame.phase}: bytes, row → column`, MATRIX.size + 40, 19));
    m.forEach((row, i) => row.forEach((b, j) => {
      mg.append('rect').attr('x', j * cell).attr('y', i * cell).attr('width', cell - 2).attr('height', cell - 2)
        .attr('fill', i === j ? 'var(--bg)' : heat(b)).attr('stroke', i === j ? 'var(--rule)' : null)
        .append('title').text(`rank ${i} → rank ${j}: ${bytes(b)}${i === j ? ' (stays on the rank)' : ''}`);
      if (cell >= 48) {
        mg.append('text').attr('x', j * cell + cell / 2 - 1).attr('y', i * cell + cell / 2 + 4).attr('text-anchor', 'middle')
          .attr('class', 'legend-label').style('fill', i === j || b > (d3.max(m.flat()) || 1) / 2 ? '#e8eaed' : '#10131a').text(bytes(b));
      }
    }));
    for (let r = 0; r < n; r += 1) {
      mg.append('text').attr('class', 'lane-label').attr('x', -6).attr('y', r * cell + cell / 2 + 4).attr('text-anchor', 'end').text(`r${r}`);
      mg.append('text').attr('class', 'lane-label').attr('x', r * cell + cell / 2).attr('y', -6).attr('text-anchor', 'middle').text(`r${r}`);
    }
    // Measured beside the formula: an all-to-all of M bytes sends (N−1)/N · M off each rank if routing is uniform.
    const off = d3.sum(m.flatMap((row, i) => row.filter((_, j) => j !== i)));
    const formula = d3.sum(m, (row) => ((n - 1) / n) * d3.sum(row));
    mg.append('text').attr('class', 'legend-label').attr('x', -30).attr('y', MATRIX.size + 24)
      .text(fit(`${bytes(off)} left their rank`, MATRIX.size + 40, LABEL));
    mg.append('text').attr('class', 'legend-label').attr('x', -30).attr('y', MATRIX.size + 50)
      .text(fit(`(N−1)/N · M: ${bytes(Math.round(formula))}`, MATRIX.size + 40, LABEL));
  }

  const dropped = routes.reduce((acc, d) => acc + d.kept.filter((k) => !k).length, 0);
  svg.attr('data-phase', frame.phase).attr('data-dropped', route ? dropped : null)
    .attr('aria-label', `${n * T} tokens routed to ${E} experts on ${n} ranks${route ? `; ${dropped} assignments dropped at capacity` : ''}`);
}
