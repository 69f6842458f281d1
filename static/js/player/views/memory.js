/**
 * The memory view: per rank, the bytes of live tensors by role (measured, not modelled),
 * stacked; the scale holds still across frames so growth and freeing are visible.
 */
import { bytes, roleColor } from '../format.js';

const W = 960;
const H = 520;
const LEFT = 90;
const BOTTOM = 40;
const LEGEND = 170;

/** Each rank's memory as of frame `index`: the latest frame at or before it that measured any. */
function memoryAt(frames, index) {
  return frames[index].ranks.map((rank) => {
    for (let i = index; i >= 0; i -= 1) {
      const memory = frames[i].ranks[rank.rank]?.memory;
      if (memory && Object.keys(memory).length) return { rank: rank.rank, memory };
    }
    return { rank: rank.rank, memory: {} };
  });
}

export function render(svg, { frames, index }) {
  const d3 = window.d3;
  svg.selectAll('*').remove();
  const frame = { ranks: memoryAt(frames, index) };
  const roles = Array.from(new Set(frames.flatMap((f) => f.ranks.flatMap((r) => Object.keys(r.memory)))));
  if (!roles.length) return;
  const total = (r) => roles.reduce((sum, role) => sum + (r.memory[role] ?? 0), 0);
  const max = d3.max(frames, (f) => d3.max(f.ranks, total)) || 1;
  const x = d3.scaleBand().domain(frame.ranks.map((r) => r.rank)).range([LEFT, W - LEGEND]).padding(0.25);
  const y = d3.scaleLinear().domain([0, max]).nice().range([H - BOTTOM, 12]);

  const stacks = d3.stack().keys(roles).value((r, role) => r.memory[role] ?? 0)(frame.ranks);
  svg.append('g').selectAll('g').data(stacks).join('g').attr('fill', (s) => roleColor(s.key))
    .attr('class', (s) => `memory-role role-${s.key}`)
    .selectAll('rect').data((s) => s.map((d) => ({ ...d, role: s.key }))).join('rect')
    .attr('x', (d) => x(d.data.rank)).attr('width', x.bandwidth())
    .attr('y', (d) => y(d[1])).attr('height', (d) => Math.max(0, y(d[0]) - y(d[1])))
    .append('title').text((d) => `rank ${d.data.rank} ${d.role}: ${bytes(d.data.memory[d.role] ?? 0)}`);
  svg.append('g').selectAll('text').data(frame.ranks).join('text').attr('class', 'bar-total')
    .attr('x', (r) => x(r.rank) + x.bandwidth() / 2).attr('y', (r) => y(total(r)) - 5)
    .attr('text-anchor', 'middle').text((r) => bytes(total(r)));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(0,${H - BOTTOM})`)
    .call(d3.axisBottom(x).tickFormat((r) => `rank ${r}`));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(${LEFT},0)`)
    .call(d3.axisLeft(y).ticks(5).tickFormat((v) => bytes(v)));
  const legend = svg.append('g').attr('transform', `translate(${W - LEGEND + 16},20)`);
  roles.forEach((role, i) => {
    legend.append('rect').attr('y', i * 28).attr('width', 18).attr('height', 18).attr('fill', roleColor(role));
    legend.append('text').attr('class', 'legend-label').attr('x', 26).attr('y', i * 28 + 15).text(role);
  });
}
