/**
 * The mesh view: ranks laid out as a dp × pp × tp grid, every transfer coloured by the mesh
 * dimension it ran on (Transfer.group, set by comm.name_group).
 *
 * A grey box is a node: the tp ranks of one (replica, stage) sit side by side inside it, the pp
 * stages are rows and the dp replicas columns, so tensor-parallel collectives stay inside a node
 * while pipeline messages and data-parallel all-reduces cross between nodes. Under the grid, the
 * bytes each dimension moved, summed from the frames' transfers: in this frame, up to this frame,
 * and over the whole run so far received.
 */
import { bytes } from '../format.js';
import { fit } from './layout.js';

const GRID_TOP = 36;
const LABEL = 18;
const DIMS = ['tp', 'pp', 'dp'];
const DIM_COLOR = {
  tp: 'var(--dim-tp, #c792ea)',
  pp: 'var(--dim-pp, #ffb454)',
  dp: 'var(--dim-dp, #7ee07e)',
};
const DIM_TEXT = {
  tp: 'tp: inside a node',
  pp: 'pp: node to node',
  dp: 'dp: node to node',
};

function colorOf(group) {
  return DIM_COLOR[group] ?? 'var(--fg-muted, #9aa3b2)';
}

/** Mesh shape from the frame (the scenario says it), else a 1 × 1 × n line of ranks. */
function shapeOf(frame) {
  const mesh = frame.extra?.mesh;
  if (mesh && mesh.dp * mesh.pp * mesh.tp === frame.ranks.length) return mesh;
  return { dp: 1, pp: 1, tp: frame.ranks.length };
}

function coordOf(rank, shape) {
  const c = rank.extra?.coord;
  if (c) return c;
  const r = rank.rank;
  return { dp: Math.floor(r / (shape.tp * shape.pp)), pp: Math.floor(r / shape.tp) % shape.pp, tp: r % shape.tp };
}

function bytesByGroup(frames) {
  const out = {};
  for (const f of frames) for (const t of f.transfers) out[t.group] = (out[t.group] ?? 0) + t.bytes;
  return out;
}

export function render(svg, { frame, frames, index, size }) {
  const d3 = window.d3;
  const { width: W, height: H } = size;
  if (!frame) return;
  const shape = shapeOf(frame);
  const all = bytesByGroup(frames);
  const legendRows = Math.min(4, [...new Set([...DIMS.filter((d) => shape[d] > 1 || all[d]), ...Object.keys(all)])].length);
  const GRID_BOTTOM = H - 36 - legendRows * 26;  // the legend's last baseline 10 px above the bottom
  const gap = 14;
  const nodeW = (W - 20 - (shape.dp - 1) * gap) / shape.dp;
  const nodeH = Math.min(190, (GRID_BOTTOM - GRID_TOP - (shape.pp - 1) * gap) / shape.pp);
  const pad = 8;
  const cellGap = 6;
  const cellW = (nodeW - 2 * pad - (shape.tp - 1) * cellGap) / shape.tp;
  // Cells start below the node's name with room for a group's outline (3 px out, 3 px wide): the
  // outline never runs through the name's descenders.
  const CELL_TOP = 29;
  const cellH = nodeH - CELL_TOP - 8;
  const nodeX = (d) => 10 + d * (nodeW + gap);
  const nodeY = (s) => GRID_TOP + s * (nodeH + gap);
  const cell = {};
  for (const rank of frame.ranks) {
    const c = coordOf(rank, shape);
    const x = nodeX(c.dp) + pad + c.tp * (cellW + cellGap);
    const y = nodeY(c.pp) + CELL_TOP;
    cell[rank.rank] = { x, y, cx: x + cellW / 2, cy: y + cellH / 2, coord: c, rank };
  }
  const small = cellW < 70 || cellH < 56;

  svg.append('text').attr('class', 'legend-label').attr('x', 10).attr('y', 22)
    .text(fit(`dp × pp × tp = ${shape.dp} × ${shape.pp} × ${shape.tp}: a node per replica and stage`, W - 20, LABEL));

  const defs = svg.append('defs');
  for (const dim of [...DIMS, 'other']) {
    defs.append('marker').attr('id', `mesh-arrow-${dim}`).attr('viewBox', '0 0 10 10').attr('refX', 9)
      .attr('refY', 5).attr('markerWidth', 6).attr('markerHeight', 6).attr('orient', 'auto-start-reverse')
      .append('path').attr('d', 'M0,0L10,5L0,10z').attr('fill', colorOf(dim));
  }

  // Nodes, then the ranks inside them.
  const nodes = svg.append('g').attr('class', 'mesh-nodes');
  // The node names go on top of everything at the end (a tp group's outline runs along their baseline).
  const nodeLabels = svg.append('g').attr('class', 'mesh-node-labels');
  for (let d = 0; d < shape.dp; d += 1) {
    for (let s = 0; s < shape.pp; s += 1) {
      nodes.append('rect').attr('class', 'rank-box').attr('x', nodeX(d)).attr('y', nodeY(s))
        .attr('width', nodeW).attr('height', nodeH).attr('rx', 10).attr('opacity', 0.9);
      nodeLabels.append('text').attr('class', 'legend-label halo').attr('x', nodeX(d) + pad).attr('y', nodeY(s) + 19)
        .text(fit(nodeW > 260 ? `node: replica ${d}, stage ${s}` : `replica ${d}, stage ${s}`, nodeW - 2 * pad, LABEL));
    }
  }
  const ranks = svg.append('g').attr('class', 'mesh-ranks');
  for (const { x, y, rank } of Object.values(cell)) {
    const idle = rank.status === 'idle';
    const g = ranks.append('g').attr('class', 'mesh-rank').attr('data-rank', rank.rank).attr('data-key', `mesh-${rank.rank}`);
    g.append('rect').attr('x', x).attr('y', y).attr('width', cellW).attr('height', cellH).attr('rx', 6)
      .attr('fill', idle ? 'none' : 'var(--bg-raised, #1c2230)').attr('stroke', 'var(--rule, #3a4255)')
      .attr('stroke-dasharray', idle ? '4 3' : null);
    g.append('text').attr('class', 'rank-title').attr('x', x + 8).attr('y', y + 24).text(`r${rank.rank}`);
    if (rank.status && cellH > 52) {
      g.append('text').attr('class', 'rank-status').attr('x', x + 8).attr('y', y + 48)
        .text(fit(rank.status, cellW - 14, LABEL));
    }
  }

  const marks = svg.append('g').attr('class', 'mesh-transfers');
  // Point to point (pipeline): an arrow from sender to receiver, forward on the left, backward on the right.
  for (const t of frame.transfers.filter((tr) => tr.dst != null)) {
    const a = cell[t.src];
    const b = cell[t.dst];
    if (!a || !b) continue;
    const down = b.cy > a.cy;
    const dx = (down ? -1 : 1) * cellW * 0.22;
    const x1 = a.cx + dx;
    const x2 = b.cx + dx;
    const y1 = down ? a.y + cellH : a.y;
    const y2 = down ? b.y : b.y + cellH;
    const dim = DIM_COLOR[t.group] ? t.group : 'other';
    marks.append('path').attr('class', `transfer transfer-${t.op} mesh-${dim}`).attr('data-at', frame.index)
      .attr('d', `M${x1},${y1} L${x2},${y2}`).attr('stroke', colorOf(t.group)).attr('stroke-width', 2.5)
      .attr('fill', 'none').attr('marker-end', `url(#mesh-arrow-${dim})`);
    marks.append('text').attr('class', 'transfer-label').attr('x', (x1 + x2) / 2 + (down ? -4 : 4))
      .attr('y', (y1 + y2) / 2 + 5).attr('text-anchor', down ? 'end' : 'start')
      .style('fill', colorOf(t.group)).text(bytes(t.bytes));
  }

  // Collectives: per rank and group, how many and how many bytes; drawn as the group's outline.
  const collectives = d3.rollups(frame.transfers.filter((t) => t.dst == null),
    (ts) => ({ n: ts.length, bytes: d3.sum(ts, (t) => t.bytes), ops: [...new Set(ts.map((t) => t.op))] }),
    (t) => t.group, (t) => t.src);
  for (const [group, perRank] of collectives) {
    const members = perRank.map(([r]) => cell[r]).filter(Boolean);
    // Members of one group instance share every coordinate except the group's own dimension.
    const key = (c) => DIMS.filter((dim) => dim !== group).map((dim) => c.coord[dim]).join(',');
    const instances = d3.groups(members, key);
    const stats = new Map(perRank);
    for (const [, cells] of instances) {
      const x0 = d3.min(cells, (c) => c.x) - 3;
      const x1 = d3.max(cells, (c) => c.x) + cellW + 3;
      const y0 = d3.min(cells, (c) => c.y) - 3;
      const y1 = d3.max(cells, (c) => c.y) + cellH + 3;
      if (group === 'tp' || cells.length === 1 || !DIM_COLOR[group]) {
        marks.append('rect').attr('class', `mesh-collective mesh-${group}`).attr('x', x0).attr('y', y0)
          .attr('width', x1 - x0).attr('height', y1 - y0).attr('rx', 8).attr('fill', 'none')
          .attr('stroke', colorOf(group)).attr('stroke-width', 3);
      } else {  // across nodes: a line through the members, one height per instance so they stay apart
        const other = DIMS.filter((dim) => dim !== group);
        const slot = other.reduce((acc, dim) => acc * shape[dim] + cells[0].coord[dim], 0);
        const slots = other.reduce((acc, dim) => acc * shape[dim], 1);
        const level = (c) => c.y + 30 + (cellH - 48) * (slots > 1 ? (slot % slots) / (slots - 1) : 0.5);
        const line = d3.line().curve(d3.curveMonotoneX);
        marks.append('path').attr('class', `mesh-collective mesh-${group}`)
          .attr('d', line(cells.map((c) => [c.cx, level(c)])))
          .attr('stroke', colorOf(group)).attr('stroke-width', 4).attr('fill', 'none').attr('opacity', 0.85);
        for (const c of cells) {
          marks.append('circle').attr('cx', c.cx).attr('cy', level(c)).attr('r', 6).attr('fill', colorOf(group));
        }
      }
      const s = stats.get(cells[0].rank.rank);
      marks.append('text').attr('class', 'collective-label').attr('x', x0 + 8).attr('y', y1 - 8)
        .style('fill', colorOf(group))
        .text(fit(`${s.n > 1 ? `${s.n}× ` : ''}${s.ops.map((op) => op.replace(/_/g, '-')).join('/')} ${bytes(s.bytes)}`, x1 - x0 - 12, LABEL + 1));
    }
  }

  // Bytes per dimension, measured from the transfers: this frame, up to here, whole run so far.
  const now = bytesByGroup([frame]);
  const upTo = bytesByGroup(frames.slice(0, index + 1));
  const groups = [...new Set([...DIMS.filter((d) => shape[d] > 1 || all[d]), ...Object.keys(all)])];
  nodeLabels.raise();
  const legend = svg.append('g').attr('class', 'mesh-legend').attr('transform', `translate(10,${GRID_BOTTOM + 26})`);
  legend.append('text').attr('class', 'legend-label').attr('x', 0).attr('y', 0)
    .text(fit('bytes, all ranks: this frame · so far · whole step', W - 20, LABEL));
  groups.slice(0, 4).forEach((g, i) => {
    const y = 26 + i * 26;
    legend.append('rect').attr('x', 0).attr('y', y - 13).attr('width', 16).attr('height', 16).attr('rx', 3)
      .attr('fill', colorOf(g));
    legend.append('text').attr('class', 'legend-label').attr('x', 24).attr('y', y)
      .attr('data-dim', g).attr('data-bytes', all[g] ?? 0)
      .text(fit(`${DIM_TEXT[g] ?? g}:  ${bytes(now[g] ?? 0)} · ${bytes(upTo[g] ?? 0)} · ${bytes(all[g] ?? 0)}`, W - 44, LABEL));
  });
  svg.attr('data-ranks', frame.ranks.length).attr('data-transfers', frame.transfers.length)
    .attr('aria-label', `${shape.dp}×${shape.pp}×${shape.tp} mesh; ${frame.caption}`);
}
