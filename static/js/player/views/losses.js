/**
 * The losses view (DiLoCo): two training-loss curves on the same steps, DiLoCo (the mean of the
 * workers' local losses) and the DDP baseline (the global batch's loss), drawn up to the current
 * frame; the held-out loss of both at every outer sync as dots; the syncs as dashed lines; and the
 * bytes each worker has all-reduced so far in each run, as two bars with their ratio.
 */
import { bytes, value } from '../format.js';
import { textWidth } from './layout.js';

const LABEL = 18;
const COLORS = { diloco: 'var(--accent, #5cc8ff)', ddp: 'var(--accent-strong, #ffcf5c)' };

const mean = (values) => values.reduce((a, b) => a + b, 0) / values.length;

/** Per inner step, the mean over workers of each run's loss, from the frames up to `index`. */
function curves(frames, index) {
  const points = [];
  for (const f of frames.slice(0, index + 1)) {
    if (f.phase !== 'inner') continue;
    points.push({
      step: f.extra.step,
      diloco: mean(f.ranks.map((r) => r.extra.loss)),
      ddp: mean(f.ranks.map((r) => r.extra.ddp_loss)),
    });
  }
  return points;
}

export function render(svg, { frames, index, frame, size }) {
  const d3 = window.d3;
  const { width: W, height: H } = size;
  const layout = frames[0]?.extra ?? {};
  if (layout.total_steps == null) return;
  const all = curves(frames, frames.length - 1);
  const shown = curves(frames, index);
  const evals = frame.extra.eval ?? [];
  const values = [...all.flatMap((p) => [p.diloco, p.ddp]), ...evals.flatMap((e) => [e.diloco, e.ddp])]
    .filter((v) => v > 0);

  // The bars take a column on the right; the chart the rest.
  const barsW = Math.max(190, Math.min(260, W * 0.3));
  const chart = { left: textWidth('0.001', 16) + 18, right: W - barsW - 20, top: 2 * (LABEL + 12) + 8, bottom: H - 52 };
  const bars = { left: W - barsW + 10, right: W - 10, top: chart.top + 40, bottom: chart.bottom };

  const x = d3.scaleLinear().domain([0, layout.total_steps]).range([chart.left, chart.right]);
  const y = values.length
    ? d3.scaleLog().domain([d3.min(values) * 0.8, d3.max(values) * 1.25]).range([chart.bottom, chart.top])
    : d3.scaleLinear().domain([0, 1]).range([chart.bottom, chart.top]);

  // Outer syncs so far: where DiLoCo's workers talk (DDP talks at every step).
  const syncs = frames.slice(0, index + 1).filter((f) => f.phase === 'outer_sync').map((f) => f.extra.step);
  const rules = svg.append('g').attr('class', 'syncs');
  for (const s of syncs) {
    rules.append('line').attr('data-key', `sync-${s}`).attr('x1', x(s)).attr('x2', x(s))
      .attr('y1', chart.top).attr('y2', chart.bottom)
      .attr('stroke', COLORS.diloco).attr('stroke-dasharray', '4 5').attr('opacity', 0.6);
  }
  const now = frame.extra.step ?? 0;
  svg.append('line').attr('data-key', 'now').attr('x1', x(now)).attr('x2', x(now)).attr('y1', chart.top).attr('y2', chart.bottom)
    .attr('stroke', 'var(--fg-muted, #9aa3b2)').attr('stroke-width', 1).attr('opacity', 0.5);

  const xTicks = Math.max(2, Math.min(10, Math.floor((chart.right - chart.left) / 60), layout.total_steps));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(0,${chart.bottom})`)
    .call(d3.axisBottom(x).ticks(xTicks).tickFormat(d3.format('d')));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(${chart.left},0)`)
    .call(d3.axisLeft(y).ticks(Math.max(2, Math.floor((chart.bottom - chart.top) / 60)), '~g'));
  svg.append('text').attr('class', 'legend-label').attr('x', (chart.left + chart.right) / 2).attr('y', H - 10)
    .attr('text-anchor', 'middle')
    .text(`inner step (H = ${layout.inner_steps} per sync${syncs.length ? '; dashed: syncs' : ''})`);

  for (const run of ['ddp', 'diloco']) {
    const line = d3.line().x((p) => x(p.step)).y((p) => y(p[run]));
    svg.append('path').attr('class', `loss-${run}`).attr('data-key', `loss-${run}`).attr('d', shown.length ? line(shown) : null)
      .attr('fill', 'none').attr('stroke', COLORS[run]).attr('stroke-width', 3);
  }
  // Held-out loss of the synced θ (DiLoCo) and of the DDP model at each sync so far.
  const dots = svg.append('g').attr('class', 'eval');
  for (const e of evals) {
    dots.append('circle').attr('data-key', `eval-diloco-${e.step}`).attr('cx', x(e.step)).attr('cy', y(e.diloco)).attr('r', 7)
      .attr('fill', COLORS.diloco).attr('stroke', 'var(--bg, #10131a)').attr('stroke-width', 1.5)
      .append('title').text(`DiLoCo held-out loss after sync at step ${e.step}: ${value(e.diloco)}`);
    dots.append('rect').attr('data-key', `eval-ddp-${e.step}`).attr('x', x(e.step) - 6).attr('y', y(e.ddp) - 6).attr('width', 12).attr('height', 12)
      .attr('fill', COLORS.ddp).attr('stroke', 'var(--bg, #10131a)').attr('stroke-width', 1.5)
      .append('title').text(`DDP held-out loss at step ${e.step}: ${value(e.ddp)}`);
  }

  // Legend, with the latest values: one row for the curves, one for the dots and the axis name.
  const last = shown[shown.length - 1];
  const legend = svg.append('g').attr('transform', `translate(${chart.left},${LABEL + 6})`);
  let lx = 0;
  [['diloco', 'DiLoCo, mean of workers'], ['ddp', 'DDP']].forEach(([run, label]) => {
    const text = `${label}${last ? ` ${value(last[run])}` : ''}`;
    legend.append('rect').attr('x', lx).attr('y', -8).attr('width', 24).attr('height', 5).attr('fill', COLORS[run]);
    legend.append('text').attr('class', 'legend-label').attr('x', lx + 32).attr('y', 0).text(text);
    lx += 32 + textWidth(text, LABEL) + 28;
  });
  svg.append('text').attr('class', 'legend-label').attr('x', chart.left).attr('y', 2 * LABEL + 18)
    .text(evals.length ? 'loss, log scale · dots: held-out loss at syncs' : 'loss, log scale');

  // Bytes each worker has all-reduced so far: measured by the traced collectives.
  const sent = frame.extra.bytes ?? { diloco: 0, ddp: 0 };
  const top = Math.max(layout.total_steps * (layout.bytes_per_sync ?? 0), sent.ddp, 1);
  const b = d3.scaleLinear().domain([0, top]).range([bars.bottom, bars.top + LABEL + 12]);
  const g = svg.append('g').attr('class', 'bytes');
  g.append('text').attr('class', 'legend-label').attr('x', bars.left).attr('y', LABEL + 6)
    .text('all-reduced per worker');
  const ratio = sent.diloco ? sent.ddp / sent.diloco : null;
  g.append('text').attr('class', 'transfer-label').attr('x', bars.left).attr('y', 2 * LABEL + 18)
    .text(ratio ? `DDP sent ${value(ratio)}× more` : 'DiLoCo: nothing yet');
  const bw = Math.min(70, (bars.right - bars.left - 30) / 2);
  [['diloco', 'DiLoCo'], ['ddp', 'DDP']].forEach(([run, label], i) => {
    const bx = bars.left + i * (bw + 30);
    g.append('rect').attr('data-key', `bytes-${run}`).attr('data-enter', 'grow-y').attr('x', bx).attr('width', bw).attr('y', b(sent[run]))
      .attr('height', Math.max(0, bars.bottom - b(sent[run]))).attr('fill', COLORS[run])
      .append('title').text(`${label}: ${sent[run]} bytes all-reduced per worker so far`);
    g.append('text').attr('class', 'bar-total').attr('data-key', `bytes-total-${run}`).attr('x', bx + bw / 2).attr('y', b(sent[run]) - 8)
      .attr('text-anchor', 'middle').text(bytes(sent[run]));
    g.append('text').attr('class', 'legend-label').attr('x', bx + bw / 2).attr('y', bars.bottom + 26)
      .attr('text-anchor', 'middle').text(label);
  });
  g.append('line').attr('x1', bars.left - 6).attr('x2', bars.right).attr('y1', bars.bottom).attr('y2', bars.bottom)
    .attr('stroke', 'var(--rule, #2a3040)');

  svg.attr('data-steps', shown.length).attr('data-syncs', syncs.length)
    .attr('aria-label', `Loss of DiLoCo and DDP over ${shown.length} steps; ${frame.caption}`);
}
