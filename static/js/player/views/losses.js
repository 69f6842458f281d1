/**
 * The losses view (DiLoCo): two training-loss curves on the same steps, DiLoCo (the mean of the
 * workers' local losses) and the DDP baseline (the global batch's loss), drawn up to the current
 * frame; the held-out loss of both at every outer sync as dots; the syncs as dashed lines; and the
 * bytes each worker has all-reduced so far in each run, as two bars with their ratio.
 */
import { bytes, value } from '../format.js';

const W = 960;
const H = 520;
const CHART = { left: 78, right: 660, top: 56, bottom: 460 };
const BARS = { left: 730, right: 950, top: 110, bottom: 440 };
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

export function render(svg, { frames, index, frame }) {
  const d3 = window.d3;
  svg.selectAll('*').remove();
  const layout = frames[0]?.extra ?? {};
  if (layout.total_steps == null) return;
  const all = curves(frames, frames.length - 1);
  const shown = curves(frames, index);
  const evals = frame.extra.eval ?? [];
  const values = [...all.flatMap((p) => [p.diloco, p.ddp]), ...evals.flatMap((e) => [e.diloco, e.ddp])]
    .filter((v) => v > 0);

  const x = d3.scaleLinear().domain([0, layout.total_steps]).range([CHART.left, CHART.right]);
  const y = values.length
    ? d3.scaleLog().domain([d3.min(values) * 0.8, d3.max(values) * 1.25]).range([CHART.bottom, CHART.top])
    : d3.scaleLinear().domain([0, 1]).range([CHART.bottom, CHART.top]);

  // Outer syncs so far: where DiLoCo's workers talk (DDP talks at every step).
  const syncs = frames.slice(0, index + 1).filter((f) => f.phase === 'outer_sync').map((f) => f.extra.step);
  const rules = svg.append('g').attr('class', 'syncs');
  for (const s of syncs) {
    rules.append('line').attr('x1', x(s)).attr('x2', x(s)).attr('y1', CHART.top).attr('y2', CHART.bottom)
      .attr('stroke', COLORS.diloco).attr('stroke-dasharray', '4 5').attr('opacity', 0.6);
  }
  if (syncs.length) {
    rules.append('text').attr('class', 'legend-label').attr('x', x(syncs[0]) + 4).attr('y', CHART.top + 16)
      .text(syncs.length === 1 ? 'sync' : 'syncs');
  }
  const now = frame.extra.step ?? 0;
  svg.append('line').attr('x1', x(now)).attr('x2', x(now)).attr('y1', CHART.top).attr('y2', CHART.bottom)
    .attr('stroke', 'var(--fg-muted, #9aa3b2)').attr('stroke-width', 1).attr('opacity', 0.5);

  svg.append('g').attr('class', 'axis').attr('transform', `translate(0,${CHART.bottom})`)
    .call(d3.axisBottom(x).ticks(Math.min(10, layout.total_steps)).tickFormat(d3.format('d')));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(${CHART.left},0)`)
    .call(d3.axisLeft(y).ticks(4, '~g'));
  svg.selectAll('.axis text').style('font-size', '22px');
  svg.append('text').attr('class', 'legend-label').attr('x', (CHART.left + CHART.right) / 2).attr('y', H - 14)
    .attr('text-anchor', 'middle').text(`inner step (H = ${layout.inner_steps} per sync)`);
  svg.append('text').attr('class', 'legend-label').attr('x', CHART.left - 60).attr('y', CHART.top - 10)
    .text('loss (log)');

  for (const run of ['ddp', 'diloco']) {
    const line = d3.line().x((p) => x(p.step)).y((p) => y(p[run]));
    svg.append('path').attr('class', `loss-${run}`).attr('d', shown.length ? line(shown) : null)
      .attr('fill', 'none').attr('stroke', COLORS[run]).attr('stroke-width', 2.5);
  }
  // Held-out loss of the synced θ (DiLoCo) and of the DDP model at each sync so far.
  const dots = svg.append('g').attr('class', 'eval');
  for (const e of evals) {
    dots.append('circle').attr('cx', x(e.step)).attr('cy', y(e.diloco)).attr('r', 6)
      .attr('fill', COLORS.diloco).attr('stroke', 'var(--bg, #10131a)').attr('stroke-width', 1.5)
      .append('title').text(`DiLoCo held-out loss after sync at step ${e.step}: ${value(e.diloco)}`);
    dots.append('rect').attr('x', x(e.step) - 5).attr('y', y(e.ddp) - 5).attr('width', 10).attr('height', 10)
      .attr('fill', COLORS.ddp).attr('stroke', 'var(--bg, #10131a)').attr('stroke-width', 1.5)
      .append('title').text(`DDP held-out loss at step ${e.step}: ${value(e.ddp)}`);
  }

  // Legend, with the latest values.
  const last = shown[shown.length - 1];
  const legend = svg.append('g').attr('transform', `translate(${CHART.left + 40},20)`);
  [['diloco', 'DiLoCo (mean of workers)'], ['ddp', 'DDP']].forEach(([run, label], i) => {
    const g = legend.append('g').attr('transform', `translate(${i * 340},0)`);
    g.append('rect').attr('y', 2).attr('width', 22).attr('height', 5).attr('fill', COLORS[run]);
    g.append('text').attr('class', 'legend-label').attr('x', 30).attr('y', 11)
      .text(`${label}${last ? ` ${value(last[run])}` : ''}`);
  });
  if (evals.length) {
    legend.append('text').attr('class', 'legend-label').attr('x', 240).attr('y', 40)
      .text('dots: held-out loss at syncs');
  }

  // Bytes each worker has all-reduced so far: measured by the traced collectives.
  const sent = frame.extra.bytes ?? { diloco: 0, ddp: 0 };
  const top = Math.max(layout.total_steps * (layout.bytes_per_sync ?? 0), sent.ddp, 1);
  const b = d3.scaleLinear().domain([0, top]).range([BARS.bottom, BARS.top]);
  const bars = svg.append('g').attr('class', 'bytes');
  bars.append('text').attr('class', 'legend-label').attr('x', BARS.left - 10).attr('y', BARS.top - 62)
    .text('all-reduced per worker');
  const ratio = sent.diloco ? sent.ddp / sent.diloco : null;
  bars.append('text').attr('class', 'transfer-label').attr('x', BARS.left - 10).attr('y', BARS.top - 36)
    .text(ratio ? `DDP / DiLoCo: ${value(ratio)}×` : 'DiLoCo: nothing yet');
  const bw = 70;
  [['diloco', 'DiLoCo'], ['ddp', 'DDP']].forEach(([run, label], i) => {
    const bx = BARS.left + i * (bw + 50);
    bars.append('rect').attr('x', bx).attr('width', bw).attr('y', b(sent[run]))
      .attr('height', Math.max(0, BARS.bottom - b(sent[run]))).attr('fill', COLORS[run])
      .append('title').text(`${label}: ${sent[run]} bytes all-reduced per worker so far`);
    bars.append('text').attr('class', 'bar-total').attr('x', bx + bw / 2).attr('y', b(sent[run]) - 8)
      .attr('text-anchor', 'middle').text(bytes(sent[run]));
    bars.append('text').attr('class', 'legend-label').attr('x', bx + bw / 2).attr('y', BARS.bottom + 26)
      .attr('text-anchor', 'middle').text(label);
  });
  bars.append('line').attr('x1', BARS.left - 10).attr('x2', BARS.right).attr('y1', BARS.bottom).attr('y2', BARS.bottom)
    .attr('stroke', 'var(--rule, #2a3040)');

  svg.selectAll('.legend-label, .bar-total, .transfer-label').style('font-size', '22px');
  svg.attr('data-steps', shown.length).attr('data-syncs', syncs.length)
    .attr('aria-label', `Loss of DiLoCo and DDP over ${shown.length} steps; ${frame.caption}`);
}
