/**
 * The timeline view: one lane per rank, the measured spans (compute, communication, idle)
 * of every frame so far; the current frame's spans stand out.
 */
import { ms } from '../format.js';

const W = 960;
const H = 520;
const LEFT = 80;
const TOP = 12;
const AXIS = 36;

export function render(svg, { frames, index, meta }) {
  const d3 = window.d3;
  svg.selectAll('*').remove();
  const n = meta?.world_size ?? frames[0]?.ranks.length ?? 1;
  const all = frames.flatMap((f) => f.spans.map((s) => ({ ...s, frame: f.index })));
  const shown = all.filter((s) => s.frame <= index);
  if (!all.length) return;
  const x = d3.scaleLinear().domain([d3.min(all, (s) => s.start), d3.max(all, (s) => s.end)]).range([LEFT, W - 10]);
  const lane = (H - TOP - AXIS) / n;
  const y = (r) => TOP + r * lane;

  svg.append('g').selectAll('text').data(d3.range(n)).join('text')
    .attr('class', 'lane-label').attr('x', 8).attr('y', (r) => y(r) + lane / 2 + 6).text((r) => `rank ${r}`);
  svg.append('g').selectAll('line').data(d3.range(n + 1)).join('line')
    .attr('class', 'lane-rule').attr('x1', LEFT).attr('x2', W - 10).attr('y1', y).attr('y2', y);

  const spans = svg.append('g').selectAll('g').data(shown).join('g')
    .attr('class', (s) => `span span-${s.kind}${s.frame === index ? ' current' : ''}`);
  // Nested spans (a comm inside backward) are drawn thinner on top of their parent.
  spans.append('rect')
    .attr('x', (s) => x(s.start)).attr('width', (s) => Math.max(1.5, x(s.end) - x(s.start)))
    .attr('y', (s) => y(s.rank) + (s.kind === 'comm' ? lane * 0.42 : lane * 0.15))
    .attr('height', (s) => (s.kind === 'comm' ? lane * 0.4 : lane * 0.7))
    .append('title').text((s) => `${s.name}: ${ms(s.end - s.start)}${s.args?.bytes ? `, ${s.args.bytes} B` : ''}`);
  spans.filter((s) => x(s.end) - x(s.start) > 80 && s.kind !== 'comm').append('text')
    .attr('class', 'span-label').attr('x', (s) => x(s.start) + 4).attr('y', (s) => y(s.rank) + lane * 0.15 + 20)
    .text((s) => s.name);

  const axis = d3.axisBottom(x).ticks(6).tickFormat((t) => ms(t));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(0,${H - AXIS + 4})`).call(axis);
  svg.attr('data-spans', shown.length);
}
