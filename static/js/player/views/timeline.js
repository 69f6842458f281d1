/**
 * The timeline view: one lane per rank, the measured spans (compute, communication, idle) of
 * every frame so far; the current frame's spans stand out, and new ones fade in over the outlines
 * of the spans still to come, so the first frames (set-up, before anything is timed) already show
 * the step's shape on its whole time axis instead of an empty one. Drawn for its pane: lane labels
 * and ticks at reading size, span names only where they fit. Keys: span.
 */
import { ms } from '../format.js';
import { fit, textWidth } from './layout.js';

const AXIS = 58; // the time axis, and the legend under it
const LABEL = 18;

export function render(svg, { frames, index, meta, size }) {
  const d3 = window.d3;
  const { width: W, height: H } = size;
  const n = meta?.world_size ?? frames[0]?.ranks.length ?? 1;
  const all = frames.flatMap((f) => f.spans.map((s, i) => ({ ...s, frame: f.index, key: `span-${f.index}-${i}` })));
  const shown = all.filter((s) => s.frame <= index);
  if (!all.length) return;
  const left = textWidth(n > 9 ? 'r10' : 'rank 0', LABEL) + 16;
  const top = 6;
  const x = d3.scaleLinear().domain([d3.min(all, (s) => s.start), d3.max(all, (s) => s.end)]).range([left, W - 14]);
  const lane = (H - top - AXIS) / n;
  const y = (r) => top + r * lane;

  svg.append('g').selectAll('text').data(d3.range(n)).join('text')
    .attr('class', 'lane-label').attr('x', 6).attr('y', (r) => y(r) + lane / 2 + LABEL * 0.35)
    .text((r) => (lane >= LABEL ? `${left > 60 ? 'rank ' : 'r'}${r}` : ''));
  svg.append('g').selectAll('line').data(d3.range(n + 1)).join('line')
    .attr('class', 'lane-rule').attr('x1', left).attr('x2', W - 14).attr('y1', y).attr('y2', y);

  // A recompute (activation checkpointing) is compute too, but the point of its slide: its own colour.
  const kindOf = (s) => (s.name === 'recompute' ? 'recompute' : s.kind);
  // Communication and recompute run inside a compute span (an all-gather inside backward): a thinner bar.
  const nested = (s) => s.kind === 'comm' || kindOf(s) === 'recompute';
  const spanY = (s) => y(s.rank) + (nested(s) ? lane * 0.45 : lane * 0.12);
  const spanH = (s) => (nested(s) ? lane * 0.42 : lane * 0.76);
  // What later frames will time: outlines, under the spans (a span fades in over its outline).
  svg.append('g').attr('class', 'spans-ahead').selectAll('rect').data(all.filter((s) => s.frame > index)).join('rect')
    .attr('class', 'span-ahead').attr('x', (s) => x(s.start)).attr('width', (s) => Math.max(1.5, x(s.end) - x(s.start)))
    .attr('y', spanY).attr('height', spanH);
  // Nested spans are drawn after the others, so they lie on top of their parent: a parent ends after what it
  // encloses and comes in a later frame, and drawn in frame order it covered them (HSDP's last step showed
  // no communication at all).
  const spans = svg.append('g').selectAll('g').data(d3.sort(shown, (s) => nested(s))).join('g')
    .attr('class', (s) => `span span-${kindOf(s)}${s.frame === index ? ' current' : ''}`);
  spans.append('rect').attr('data-key', (s) => s.key)
    .attr('x', (s) => x(s.start)).attr('width', (s) => Math.max(1.5, x(s.end) - x(s.start)))
    .attr('y', spanY).attr('height', spanH)
    .append('title').text((s) => `${s.name}: ${ms(s.end - s.start)}${s.args?.bytes ? `, ${s.args.bytes} B` : ''}`);
  if (lane * 0.76 >= LABEL + 4) {
    spans.filter((s) => s.kind === 'compute' && kindOf(s) !== 'recompute'
      && x(s.end) - x(s.start) > textWidth('forward', LABEL) + 8).append('text')
      .attr('class', 'span-label').attr('x', (s) => x(s.start) + 4)
      .attr('y', (s) => y(s.rank) + lane * 0.12 + Math.min(lane * 0.76, LABEL + 8) / 2 + LABEL * 0.35)
      .text((s) => fit(s.name, x(s.end) - x(s.start) - 8, LABEL));
  }

  // What the colours mean, for the kinds this run has.
  const kinds = new Set(all.map(kindOf));
  const legend = [['compute', 'compute'], ['recompute', 'recompute'], ['comm', 'communication'], ['idle', 'idle']]
    .filter(([k]) => kinds.has(k));
  if (shown.length < all.length) legend.push(['ahead', 'later']);
  let lx = W - 14;
  for (const [k, text] of legend.reverse()) {
    lx -= textWidth(text, LABEL) + 30;
    const g = svg.append('g').attr('class', `span span-${k} current legend`).attr('transform', `translate(${lx},${H - 8})`);
    g.append('rect').attr('class', k === 'ahead' ? 'span-ahead' : null).attr('y', -14).attr('width', 16).attr('height', 16);
    g.append('text').attr('class', 'legend-label').attr('x', 22).attr('y', 0).text(text);
  }

  const ticks = Math.max(2, Math.floor((W - left) / 110));
  const axis = d3.axisBottom(x).ticks(ticks).tickFormat((t) => ms(t));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(0,${H - AXIS + 4})`).call(axis);
  // A tick at either end of the axis keeps its whole label inside the view: anchored at its end.
  const tickPx = parseFloat(getComputedStyle(svg.select('.axis .tick text').node() ?? svg.node()).fontSize) || LABEL;
  svg.selectAll('.axis .tick text').each(function anchor(t) {
    const half = textWidth(ms(t), tickPx) / 2;
    if (x(t) + half > W - 2) d3.select(this).attr('text-anchor', 'end').attr('dx', '0.3em');
    else if (x(t) - half < 2) d3.select(this).attr('text-anchor', 'start').attr('dx', '-0.3em');
  });
  svg.selectAll('.legend text').style('fill', null);
  svg.attr('data-spans', shown.length);
}
