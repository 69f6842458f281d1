/**
 * The memory view: per rank, the bytes of live tensors by role (measured, not modelled),
 * stacked; the scale holds still across frames so bars visibly grow and shrink between them.
 * Where the run says so, a comparison stands beside the measurement: a host bar for what CPU
 * offload moved off the device (measured), and, for ZeRO, a faint outline at what plain DDP would
 * hold per rank (the paper's formula, from the run's summary). Keys: rank/role.
 */
import { bytes, roleColor } from '../format.js';
import { textWidth } from './layout.js';

const LABEL = 18;
const TICK = 16;

/** Each rank's memory as of frame `index`: the latest frame at or before it that measured any. */
function memoryAt(frames, index) {
  return frames[index].ranks.map((rank) => {
    for (let i = index; i >= 0; i -= 1) {
      const r = frames[i].ranks[rank.rank];
      if (r?.memory && Object.keys(r.memory).length) return { rank: rank.rank, memory: r.memory, host: r.extra?.host_memory ?? {} };
    }
    return { rank: rank.rank, memory: {}, host: {} };
  });
}

// Model states at the bottom of a bar, in the order the talk names them; buffers on top.
const ROLE_ORDER = ['parameters', 'gradients', 'optimizer', 'activations', 'gathered', 'buffer'];
const order = (role) => (ROLE_ORDER.includes(role) ? ROLE_ORDER.indexOf(role) : ROLE_ORDER.length);

const sum = (o) => Object.values(o ?? {}).reduce((a, b) => a + b, 0);

export function render(svg, { frames, index, size, summary }) {
  const d3 = window.d3;
  const { width: W, height: H } = size;
  const ranks = memoryAt(frames, index);
  // The roles this run ever held bytes in (a stage without gathered buffers shows no such role).
  const roles = Array.from(new Set(frames.flatMap((f) => f.ranks.flatMap((r) => Object.keys(r.memory)
    .filter((role) => r.memory[role] > 0)))))
    .sort((a, b) => order(a) - order(b));
  if (!roles.length) return;
  const hasHost = frames.some((f) => f.ranks.some((r) => sum(r.extra?.host_memory) > 0));
  const stage = frames[0]?.extra?.stage;
  // What plain DDP holds per rank for the same model: the formula's model states, summed over roles.
  const ddpFigure = stage > 0 ? summary?.figures?.model_states_ddp_formula : null;
  const ddp = ddpFigure && typeof ddpFigure === 'object' ? sum(ddpFigure) : (Number(ddpFigure) || null);
  const total = (r) => roles.reduce((acc, role) => acc + (r.memory[role] ?? 0), 0);
  const max = Math.max(d3.max(frames, (f) => d3.max(f.ranks, (r) => sum(r.memory))) || 1,
    hasHost ? d3.max(frames, (f) => d3.max(f.ranks, (r) => sum(r.extra?.host_memory))) : 0, ddp ?? 0);

  // Legend: a row (or two) of role swatches along the top.
  const legendItems = [...roles.map((role) => ({ role, label: role }))];
  if (hasHost) legendItems.push({ role: 'host', label: 'hatched: host (offloaded)' });
  if (ddp) legendItems.push({ role: 'ddp', label: 'dashed: DDP model states' });
  const legend = svg.append('g').attr('class', 'memory-legend');
  let lx = 8;
  let ly = 6;
  for (const item of legendItems) {
    const w = 24 + textWidth(item.label, LABEL) + 18;
    if (lx + w > W && lx > 8) { lx = 8; ly += LABEL + 8; }
    const g = legend.append('g').attr('transform', `translate(${lx},${ly})`);
    if (item.role === 'ddp') {
      g.append('rect').attr('y', 2).attr('width', 16).attr('height', 16).attr('fill', 'none')
        .attr('stroke', 'var(--fg-muted)').attr('stroke-dasharray', '4 3').attr('stroke-width', 1.5);
    } else if (item.role === 'host') {
      g.append('rect').attr('y', 2).attr('width', 16).attr('height', 16).attr('fill', 'url(#mem-host)');
    } else {
      g.append('rect').attr('y', 2).attr('width', 16).attr('height', 16).attr('fill', roleColor(item.role));
    }
    g.append('text').attr('class', 'legend-label').attr('x', 22).attr('y', 16).text(item.label);
    lx += w;
  }
  const top = ly + LABEL + 8 + LABEL + 6; // the legend, then room for the totals above the bars
  const bottom = H - 30;
  const left = textWidth('10.0 kB', TICK) + 14;

  const defs = svg.append('defs');
  defs.append('pattern').attr('id', 'mem-host').attr('width', 8).attr('height', 8)
    .attr('patternUnits', 'userSpaceOnUse').attr('patternTransform', 'rotate(45)')
    .append('rect').attr('width', 4).attr('height', 8).attr('fill', 'var(--role-optimizer, #ffb454)');

  const x = d3.scaleBand().domain(ranks.map((r) => r.rank)).range([left, W - 8]).padding(0.22);
  const y = d3.scaleLinear().domain([0, max]).nice().range([bottom, top]);
  const barW = hasHost ? x.bandwidth() * 0.6 : x.bandwidth();

  if (ddp) {
    svg.append('g').attr('class', 'ddp-outline').selectAll('rect').data(ranks).join('rect')
      .attr('x', (r) => x(r.rank) - 3).attr('width', barW + 6).attr('y', y(ddp)).attr('height', bottom - y(ddp))
      .attr('fill', 'var(--fg-muted)').attr('fill-opacity', 0.06)
      .attr('stroke', 'var(--fg-muted)').attr('stroke-dasharray', '5 4').attr('stroke-width', 1.5)
      .append('title').text(`plain DDP would hold ${bytes(ddp)} of model states per rank (ZeRO paper's formula for this model)`);
  }

  const stacks = d3.stack().keys(roles).value((r, role) => r.memory[role] ?? 0)(ranks);
  svg.append('g').selectAll('g').data(stacks).join('g').attr('fill', (s) => roleColor(s.key))
    .attr('class', (s) => `memory-role role-${s.key}`)
    .selectAll('rect').data((s) => s.map((d) => ({ ...d, role: s.key }))).join('rect')
    .attr('data-key', (d) => `mem-${d.data.rank}-${d.role}`).attr('data-enter', 'grow-y')
    .attr('x', (d) => x(d.data.rank)).attr('width', barW)
    .attr('y', (d) => y(d[1])).attr('height', (d) => Math.max(0, y(d[0]) - y(d[1])))
    .append('title').text((d) => `rank ${d.data.rank} ${d.role}: ${bytes(d.data.memory[d.role] ?? 0)}`);
  svg.append('g').selectAll('text').data(ranks).join('text').attr('class', 'bar-total halo')
    .attr('data-key', (r) => `total-${r.rank}`)
    .attr('x', (r) => x(r.rank) + barW / 2).attr('y', (r) => y(total(r)) - 6)
    .attr('text-anchor', 'middle').text((r) => bytes(total(r)));

  if (hasHost) {
    const hostRoles = Array.from(new Set(frames.flatMap((f) => f.ranks.flatMap((r) => Object.keys(r.extra?.host_memory ?? {})))));
    const host = d3.stack().keys(hostRoles).value((r, role) => r.host[role] ?? 0)(ranks);
    svg.append('g').selectAll('g').data(host).join('g')
      .selectAll('rect').data((s) => s.map((d) => ({ ...d, role: s.key }))).join('rect')
      .attr('data-key', (d) => `host-${d.data.rank}-${d.role}`)
      .attr('x', (d) => x(d.data.rank) + barW + 4).attr('width', x.bandwidth() - barW - 4)
      .attr('y', (d) => y(d[1])).attr('height', (d) => Math.max(0, y(d[0]) - y(d[1])))
      .attr('fill', (d) => (d.role === 'optimizer' ? 'url(#mem-host)' : roleColor(d.role))).attr('fill-opacity', 0.8)
      .append('title').text((d) => `rank ${d.data.rank} host ${d.role}: ${bytes(d.data.host[d.role] ?? 0)}`);
  }

  const narrow = x.bandwidth() < textWidth('rank 0', TICK) + 6;
  svg.append('g').attr('class', 'axis').attr('transform', `translate(0,${bottom})`)
    .call(d3.axisBottom(x).tickSize(0).tickPadding(8).tickFormat((r) => (narrow ? `r${r}` : `rank ${r}`)));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(${left},0)`)
    .call(d3.axisLeft(y).ticks(Math.max(2, Math.min(5, Math.floor((bottom - top) / 50)))).tickFormat((v) => bytes(v)));
  svg.attr('data-roles', roles.join(' '));
}
