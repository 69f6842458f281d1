/**
 * The ranks view: one box per rank with the tensors it holds (real values as coloured
 * cells, shape and bytes), and the frame's transfers as arrows labelled with their bytes.
 */
import { bytes, roleColor, value } from '../format.js';

const W = 960;
const H = 520;
const ARROW_ZONE = 120;

function valueScale(frame) {
  let max = 0;
  for (const rank of frame.ranks) {
    for (const t of rank.tensors) for (const v of t.values ?? []) max = Math.max(max, Math.abs(v));
  }
  return window.d3.scaleSequential(window.d3.interpolateRdBu).domain([max || 1, -(max || 1)]);
}

export function render(svg, { frame, meta }) {
  const d3 = window.d3;
  svg.selectAll('*').remove();
  const n = frame.ranks.length;
  const gap = 12;
  const boxW = (W - gap * (n + 1)) / n;
  const boxH = H - ARROW_ZONE - 8;
  const x = (r) => gap + r * (boxW + gap);
  const color = valueScale(frame);
  const defs = svg.append('defs');
  defs.append('marker').attr('id', 'sim-arrow').attr('viewBox', '0 0 10 10').attr('refX', 9).attr('refY', 5)
    .attr('markerWidth', 7).attr('markerHeight', 7).attr('orient', 'auto-start-reverse')
    .append('path').attr('d', 'M0,0L10,5L0,10z').attr('class', 'sim-arrowhead');

  const boxes = svg.selectAll('g.rank').data(frame.ranks).join('g')
    .attr('class', 'rank').attr('transform', (d) => `translate(${x(d.rank)},8)`);
  boxes.append('rect').attr('class', 'rank-box').attr('width', boxW).attr('height', boxH).attr('rx', 8);
  boxes.append('text').attr('class', 'rank-title').attr('x', 10).attr('y', 28)
    .text((d) => (n > 6 ? `r${d.rank}` : `rank ${d.rank}`));
  boxes.append('text').attr('class', 'rank-status').attr('x', boxW - 8).attr('y', 28).attr('text-anchor', 'end')
    .text((d) => (n > 3 ? '' : d.status ?? ''));
  boxes.filter((d) => n > 3 && d.status).append('text').attr('class', 'rank-status')
    .attr('x', 10).attr('y', 50).text((d) => d.status);

  boxes.each(function drawTensors(rank) {
    const g = d3.select(this);
    let y = n > 3 && rank.status ? 62 : 42;
    const maxTensors = Math.max(1, Math.floor((boxH - y) / 62));
    for (const tensor of rank.tensors.slice(0, maxTensors)) {
      g.append('text').attr('class', 'tensor-name').attr('x', 10).attr('y', y + 16)
        .style('fill', roleColor(tensor.role)) // a style, so the stylesheet's text colour does not win
        .text(`${tensor.name}${boxW > 150 ? ` [${tensor.shape.join('×')}]` : ''}`);
      g.append('text').attr('class', 'tensor-bytes').attr('x', boxW - 8).attr('y', y + 16)
        .attr('text-anchor', 'end').text(bytes(tensor.bytes));
      const values = tensor.values ?? [];
      if (values.length) {
        const perRow = Math.min(values.length, 16);
        const cell = Math.min(20, (boxW - 20) / perRow);
        const rows = Math.min(2, Math.ceil(values.length / perRow));
        const shown = values.slice(0, perRow * rows);
        g.append('g').attr('transform', `translate(10,${y + 23})`)
          .selectAll('rect').data(shown).join('rect')
          .attr('class', 'value-cell')
          .attr('x', (_, i) => (i % perRow) * cell).attr('y', (_, i) => Math.floor(i / perRow) * cell)
          .attr('width', cell - 1).attr('height', cell - 1).attr('fill', (v) => color(v))
          .append('title').text((v) => value(v));
        y += 23 + rows * cell;
      } else {
        y += 23;
      }
      if (tensor.note) {
        g.append('text').attr('class', 'tensor-note').attr('x', 10).attr('y', y + 15).text(tensor.note);
        y += 19;
      }
      y += 8;
    }
    if (rank.tensors.length > maxTensors) {
      g.append('text').attr('class', 'tensor-note').attr('x', 10).attr('y', boxH - 8)
        .text(`+${rank.tensors.length - maxTensors} more`);
    }
  });

  // Point-to-point transfers: arrows under the boxes, neighbours short, wrap-arounds long.
  const p2p = frame.transfers.filter((t) => t.dst != null);
  const baseY = boxH + 14;
  const arrows = svg.append('g').attr('class', 'transfers');
  p2p.forEach((t) => {
    const x1 = x(t.src) + boxW / 2 + 8;
    const x2 = x(t.dst) + boxW / 2 - 8;
    const span = Math.abs(t.dst - t.src);
    const depth = 18 + Math.min(span, 4) * 14;
    const path = `M${x1},${baseY} C${x1},${baseY + depth} ${x2},${baseY + depth} ${x2},${baseY}`;
    arrows.append('path').attr('class', `transfer transfer-${t.op}`).attr('d', path)
      .attr('marker-end', 'url(#sim-arrow)');
    arrows.append('text').attr('class', 'transfer-label').attr('x', (x1 + x2) / 2)
      .attr('y', baseY + depth * 0.75 + 6).attr('text-anchor', 'middle')
      .text(`${bytes(t.bytes)}${t.chunk != null && span <= 1 ? ` · chunk ${t.chunk}` : ''}`);
  });

  // Collectives, seen from each rank: a badge per op under the rank's box.
  const collectives = d3.rollups(frame.transfers.filter((t) => t.dst == null),
    (ts) => d3.sum(ts, (t) => t.bytes), (t) => t.src, (t) => `${t.op}${t.group !== 'world' ? ` (${t.group})` : ''}`);
  for (const [rank, ops] of collectives) {
    ops.forEach(([op, total], i) => {
      arrows.append('text').attr('class', 'collective-label').attr('x', x(rank) + boxW / 2)
        .attr('y', baseY + 22 + i * 22).attr('text-anchor', 'middle').text(`${op} ${bytes(total)}`);
    });
  }
  svg.attr('data-ranks', n).attr('data-transfers', frame.transfers.length);
  if (meta) svg.attr('aria-label', `${n} ranks; ${frame.caption}`);
}
