/**
 * The ranks view: one box per rank with the tensors it holds (real values as coloured cells,
 * the numbers on hover; name and bytes), and the frame's transfers as arrows labelled with their
 * bytes, a packet travelling along each one. Drawn for its pane: fewer ranks get larger boxes,
 * narrow boxes put a tensor's bytes under its name. Keys: rank, rank/tensor.
 */
import { bytes, counted, roleColor, value } from '../format.js';
import { fit, textWidth } from './layout.js';

const PAD = 10;
const TITLE = 22;
const NAME = 19;
const SMALL = 18;
const LINE = 25; // a line of text: glyph boxes are about 1.2 em tall

function valueScale(frame) {
  let max = 0;
  for (const rank of frame.ranks) {
    for (const t of rank.tensors) for (const v of t.values ?? []) max = Math.max(max, Math.abs(v));
  }
  return window.d3.scaleSequential(window.d3.interpolateRdBu).domain([max || 1, -(max || 1)]);
}

const opName = (op) => op.replace(/_/g, '-');

/**
 * What one rank sends in collective `op` over `ranks` ranks, from the buffer it handed the op (what the trace
 * records: a reduce-scatter's whole input, an all-gather's shard, an all-reduce's tensor), in a ring, with how
 * it follows from that buffer: simulations.formulas.collective_sent_bytes, the DDP slide's (N−1)/N. Null for
 * an op without a ring form.
 */
export function sentPerRank(op, buffer, ranks) {
  const part = `${ranks - 1}/${ranks}`;
  switch (op) {
    case 'reduce_scatter': return { sent: ((ranks - 1) / ranks) * buffer, how: `${part} of its ${bytes(buffer)}` };
    case 'all_to_all': return { sent: ((ranks - 1) / ranks) * buffer, how: `${part} of its ${bytes(buffer)}` };
    case 'all_gather': return { sent: (ranks - 1) * buffer, how: `its ${bytes(buffer)} to ${ranks - 1} ranks` };
    case 'all_reduce': return { sent: (2 * (ranks - 1) / ranks) * buffer, how: `2 × ${part} of its ${bytes(buffer)}` };
    default: return null;
  }
}

/**
 * A tensor's row in a box `boxW` wide: name and bytes, its values as colour cells, its note. `compact`
 * (when the rows do not all fit): the note beside the name, one line of cells, the bytes in the tooltip.
 */
function layoutRow(tensor, compact, boxW, wide) {
  const values = (tensor.values ?? []).slice(0, 16);
  // Values as colour cells, at least 12 px: two rows of them when the box is narrow (not compact).
  const perRow = Math.max(1, Math.min(values.length, Math.floor((boxW - 2 * PAD) / (compact ? 12 : 14))));
  const cell = values.length ? Math.min(compact ? 16 : 20, (boxW - 2 * PAD) / perRow) : 0;
  const cellRows = values.length ? (compact ? 1 : Math.min(2, Math.ceil(values.length / perRow))) : 0;
  // A box too narrow for the whole name keeps what tells tensors apart (unit1.gathered -> gathered; the
  // caption names the unit).
  const short = boxW < 130 || textWidth(tensor.name, NAME) > boxW - 2 * PAD;
  const name = short && tensor.name.includes('.') ? tensor.name.split('.').pop() : tensor.name;
  const nameLine = `${name}${wide && !compact && tensor.shape?.length ? ` [${tensor.shape.join('×')}]` : ''}`;
  const bytesText = bytes(tensor.bytes);
  const side = compact ? (tensor.note ?? '') : bytesText;
  const sameLine = !side || textWidth(nameLine, NAME) + textWidth(side, SMALL) + 16 <= boxW - 2 * PAD;
  const h = compact
    ? LINE + (values.length ? cell + 4 : 0) + 4
    : LINE + (sameLine ? 0 : LINE) + (values.length ? cellRows * cell + 6 : 0) + (tensor.note ? LINE : 0) + 6;
  return { tensor, perRow, cell, cellRows, nameLine, bytesText, side, sameLine, h, compact };
}

/** Where a rank's first tensor row starts: under its title, and its status when that goes below. */
function rowsTop(rank, statusBelow) {
  return TITLE + 6 + (statusBelow && rank.status ? LINE : 0) + 12;
}

/**
 * The boxes' height: what the fullest rank of the frame needs, at most the pane's room. Ranks that hold a line
 * or two get short boxes, not tall empty ones; the boxes (keyed by rank) grow and shrink from frame to frame
 * in the transition, and the transfers' arrows stay right under them.
 */
function boxHeight(frame, room, boxW, wide) {
  let needed = TITLE + 6 + 12 + LINE; // a title and a line, even for a rank that holds nothing now
  for (const rank of frame.ranks) {
    const rows = rank.tensors.reduce((a, t) => a + layoutRow(t, false, boxW, wide).h, 0);
    needed = Math.max(needed, rowsTop(rank, !wide) + rows + 4);
  }
  return Math.min(room, needed);
}

export function render(svg, { frame, meta, size }) {
  const d3 = window.d3;
  const { width: W, height: H } = size;
  const n = frame.ranks.length;
  const p2p = frame.transfers.filter((t) => t.dst != null);
  const collectives = d3.rollups(frame.transfers.filter((t) => t.dst == null),
    (ts) => d3.sum(ts, (t) => t.bytes), (t) => t.src, (t) => opName(t.op));
  const maxOps = d3.max(collectives, ([, ops]) => ops.length) ?? 0;
  const wraps = p2p.some((t) => Math.abs(t.dst - t.src) > 1);
  // Room under the boxes: arrows (deeper for a wrap-around) or collective badges (two lines each).
  const zone = p2p.length ? (wraps ? 112 : 72) : maxOps ? 12 + maxOps * 2 * LINE : 0;
  const gap = n > 4 ? 8 : 14;
  const boxW = (W - gap * (n + 1)) / n;
  const x = (r) => gap + r * (boxW + gap);
  const color = valueScale(frame);
  const wide = boxW >= 250;
  const boxH = boxHeight(frame, H - zone - 8, boxW, wide);

  const defs = svg.append('defs');
  defs.append('marker').attr('id', 'sim-arrow').attr('viewBox', '0 0 10 10').attr('refX', 9).attr('refY', 5)
    .attr('markerWidth', 6).attr('markerHeight', 6).attr('orient', 'auto-start-reverse')
    .append('path').attr('d', 'M0,0L10,5L0,10z').attr('class', 'sim-arrowhead');

  const boxes = svg.selectAll('g.rank').data(frame.ranks).join('g')
    .attr('class', 'rank').attr('data-key', (d) => `rank-${d.rank}`)
    .attr('transform', (d) => `translate(${x(d.rank)},6)`);
  boxes.append('rect').attr('class', 'rank-box').attr('width', boxW).attr('height', boxH).attr('rx', 8)
    .attr('data-key', (d) => `rank-box-${d.rank}`);
  // A rank's status ("replica 0 · shard 1") sits beside its title in a wide box: when some status
  // would not fit beside "rank N", every title shortens to "rN" rather than cut a status short.
  const besideRoom = (title) => boxW - 2 * PAD - textWidth(title, TITLE) - 12;
  const fullTitle = (d) => (boxW < 90 ? `r${d.rank}` : `rank ${d.rank}`);
  const shortTitles = wide && frame.ranks.some((d) => d.status && textWidth(d.status, SMALL) > besideRoom(fullTitle(d)));
  const title = (d) => (shortTitles ? `r${d.rank}` : fullTitle(d));
  boxes.append('text').attr('class', 'rank-title').attr('x', PAD).attr('y', TITLE + 6).text(title);
  const statusBelow = !wide;
  boxes.filter((d) => d.status).append('text').attr('class', 'rank-status')
    .attr('x', statusBelow ? PAD : boxW - PAD).attr('y', statusBelow ? TITLE + 6 + LINE : TITLE + 6)
    .attr('text-anchor', statusBelow ? 'start' : 'end')
    .text((d) => fit(d.status, statusBelow ? boxW - 2 * PAD : besideRoom(title(d)), SMALL));

  boxes.each(function drawTensors(rank) {
    const g = d3.select(this);
    let y = rowsTop(rank, statusBelow);
    let rows = rank.tensors.map((t) => layoutRow(t, false, boxW, wide));
    if (rows.reduce((a, r) => a + r.h, 0) > boxH - y - 4) rows = rank.tensors.map((t) => layoutRow(t, true, boxW, wide));
    const room = boxH - y - 4;
    let used = 0;
    let shown = 0;
    for (const row of rows) {
      if (used + row.h > room - (shown < rows.length - 1 ? SMALL + 6 : 0)) break;
      used += row.h;
      shown += 1;
    }
    for (const row of rows.slice(0, shown)) {
      const { tensor } = row;
      const t = g.append('g').attr('class', 'tensor').attr('data-key', `t-${rank.rank}-${tensor.name}`)
        .attr('transform', `translate(${PAD},${y})`);
      t.append('text').attr('class', 'tensor-name').attr('y', NAME)
        .style('fill', roleColor(tensor.role)) // a style, so the stylesheet's text colour does not win
        .text(fit(row.nameLine, boxW - 2 * PAD, NAME));
      t.append('title').text(`${tensor.name} [${(tensor.shape ?? []).join('×')}]: ${row.bytesText}${tensor.note ? `, ${tensor.note}` : ''}`);
      let yy = LINE;
      if (row.compact) {
        if (row.side && row.sameLine) {
          t.append('text').attr('class', 'tensor-note').attr('x', boxW - 2 * PAD).attr('y', NAME)
            .attr('text-anchor', 'end').text(row.side);
        }
      } else if (row.sameLine) {
        t.append('text').attr('class', 'tensor-bytes').attr('x', boxW - 2 * PAD).attr('y', NAME)
          .attr('text-anchor', 'end').text(row.bytesText);
      } else {
        t.append('text').attr('class', 'tensor-bytes').attr('y', yy + SMALL).text(row.bytesText);
        yy += LINE;
      }
      const values = (tensor.values ?? []).slice(0, row.perRow * row.cellRows);
      if (values.length) {
        t.append('g').attr('transform', `translate(0,${yy + 2})`)
          .selectAll('rect').data(values).join('rect')
          .attr('class', 'value-cell').attr('data-key', (_, i) => `v-${rank.rank}-${tensor.name}-${i}`)
          .attr('x', (_, i) => (i % row.perRow) * row.cell).attr('y', (_, i) => Math.floor(i / row.perRow) * row.cell)
          .attr('width', row.cell - 2).attr('height', row.cell - 2)
          .attr('fill', (v) => color(v))
          .append('title').text((v) => value(v));
        yy += row.cellRows * row.cell + 6;
      }
      if (tensor.note && !row.compact) {
        t.append('text').attr('class', 'tensor-note').attr('y', yy + SMALL)
          .text(fit(tensor.note, boxW - 2 * PAD, SMALL));
      }
      y += row.h;
    }
    if (shown < rows.length) {
      g.append('text').attr('class', 'tensor-note').attr('x', PAD).attr('y', boxH - 10)
        .text(`+${rows.length - shown} more`);
    }
  });

  // Point-to-point transfers: arrows under the boxes, neighbours short, wrap-arounds deep.
  const baseY = boxH + 10;
  const arrows = svg.append('g').attr('class', 'transfers');
  p2p.forEach((t) => {
    const x1 = x(t.src) + boxW / 2 + (t.dst > t.src ? 10 : -10);
    const x2 = x(t.dst) + boxW / 2 + (t.dst > t.src ? -10 : 10);
    const span = Math.abs(t.dst - t.src);
    // Neighbours: a short arc; a wrap-around runs down, under the neighbours' labels, and back up.
    const depth = span > 1 ? 64 : 30;
    const path = span > 1
      ? `M${x1},${baseY} V${baseY + depth} H${x2} V${baseY}`
      : `M${x1},${baseY} C${x1},${baseY + depth} ${x2},${baseY + depth} ${x2},${baseY}`;
    arrows.append('path').attr('class', `transfer transfer-${t.op}`).attr('data-at', frame.index).attr('d', path)
      .attr('marker-end', 'url(#sim-arrow)')
      .append('title').text(`rank ${t.src} → rank ${t.dst}: ${bytes(t.bytes)}${t.chunk != null ? `, chunk ${t.chunk}` : ''}`);
    const label = `${bytes(t.bytes)}${t.chunk != null && boxW + gap > 150 ? ` · c${t.chunk}` : ''}`;
    arrows.append('text').attr('class', 'transfer-label').attr('x', (x1 + x2) / 2)
      .attr('y', baseY + (span > 1 ? depth + 20 : depth * 0.75 + 22)).attr('text-anchor', 'middle') // under its line
      .text(fit(label, span > 1 ? W : boxW + gap, SMALL + 1));
  });

  // Collectives: an op every rank joined is drawn as one, arrows from each rank to a shared bar
  // and back (the data meets and returns), labelled once; otherwise a label under each rank.
  if (!p2p.length) {
    const byOp = d3.group(collectives.flatMap(([rank, ops]) => ops.map(([op, total]) => ({ rank, op, total }))), (c) => c.op);
    let row = 0;
    for (const [op, members] of byOp) {
      const yy = baseY + row * 2 * LINE;
      row += 1;
      const ranksIn = members.map((m) => m.rank).sort((a, b) => a - b);
      const same = new Set(members.map((m) => m.total)).size === 1;
      if (ranksIn.length > 1 && same) {
        const barY = yy + 14;
        const xs = ranksIn.map((r) => x(r) + boxW / 2);
        arrows.append('line').attr('class', 'collective-bar').attr('x1', xs[0]).attr('x2', xs[xs.length - 1])
          .attr('y1', barY).attr('y2', barY).attr('stroke', 'var(--accent-strong)').attr('stroke-width', 3);
        for (const cx of xs) {
          arrows.append('path').attr('class', 'transfer').attr('data-at', frame.index)
            .attr('d', `M${cx - 6},${boxH + 8} L${cx - 6},${barY - 3}`).attr('marker-end', 'url(#sim-arrow)');
          arrows.append('path').attr('class', 'transfer').attr('data-at', frame.index)
            .attr('d', `M${cx + 6},${barY - 3} L${cx + 6},${boxH + 8}`).attr('marker-end', 'url(#sim-arrow)');
        }
        // The bytes on the wire, as DDP's ring taught them: a reduce-scatter sends (N−1)/N of its buffer, not all of it.
        // N is the op's group (HSDP's shard groups are smaller than the ranks drawn): the transfers of that group.
        const ofOp = frame.transfers.filter((t) => t.dst == null && opName(t.op) === op);
        const group = ofOp.find((t) => t.src === ranksIn[0])?.group;
        const size = new Set(ofOp.filter((t) => t.group === group).map((t) => t.src)).size;
        const ring = sentPerRank(op.replace(/-/g, '_'), members[0].total, size);
        arrows.append('text').attr('class', 'collective-label').attr('x', (xs[0] + xs[xs.length - 1]) / 2)
          .attr('y', barY + SMALL + 8).attr('text-anchor', 'middle')
          .text(fit(ring ? `${op}: each rank sends ${bytes(ring.sent)} (${ring.how})`
            : `${op}: ${bytes(members[0].total)} from each rank`, W - 2 * gap, SMALL + 1));
      } else {
        for (const { rank, total } of members) {
          arrows.append('text').attr('class', 'collective-label').attr('x', x(rank) + boxW / 2)
            .attr('y', yy + SMALL).attr('text-anchor', 'middle').text(fit(op, boxW, SMALL + 1));
          arrows.append('text').attr('class', 'collective-label').attr('x', x(rank) + boxW / 2)
            .attr('y', yy + SMALL + LINE).attr('text-anchor', 'middle').text(bytes(total));
        }
      }
    }
  }
  svg.attr('data-ranks', n).attr('data-transfers', frame.transfers.length);
  if (meta) svg.attr('aria-label', `${counted(n, 'rank')}; ${frame.caption}`);
}
