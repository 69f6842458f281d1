/**
 * The failures view: a job's steps on two rows, before and after a restart, and its ranks below.
 *
 * Row "attempt 1" holds the planned steps (outlines), filled as they run; a checkpoint is a bar after
 * the step it saved, with the bytes the ranks wrote (measured). When a rank dies, the step it died in
 * turns red, and the steps since the last checkpoint are marked lost. Row "attempt 2" appears at the
 * restart: an arrow from the checkpoint it loads, then the replayed steps (the lost ones, again) and the
 * new ones. Below, one box per rank process: what it does in this frame, the bytes it wrote or holds,
 * red when it died, dimmed when it is not part of the job. Keys: step cells (attempt, step), checkpoints
 * (step), ranks, the resume arrow and the lost bracket, so a frame change moves or fades in only what changed.
 */
import { bytes, counted } from '../format.js';
import { fit, textWidth } from './layout.js';

const LABEL = 18;
const TITLE = 22;

/** What the frames up to `index` say: the steps each attempt ran, the checkpoints, the failure, the load. */
function story(frames, index) {
  const s = { done: { 1: new Set(), 2: new Set() }, checkpoints: [], failure: null, restarted: false, resume: null };
  for (const f of frames.slice(0, index + 1)) {
    const { attempt, step } = f.extra;
    if (f.phase === 'train' || f.phase === 'replay') s.done[attempt].add(step);
    if (f.phase === 'checkpoint') {
      const wrote = f.ranks.reduce((sum, r) => sum + (r.extra.wrote?.bytes ?? 0), 0);
      s.checkpoints.push({ step, attempt, bytes: wrote, ranks: f.ranks.filter((r) => r.extra.wrote).length });
    }
    if (f.phase === 'failure') s.failure = { step, rank: f.extra.failed_rank };
    if (f.phase === 'restart') s.restarted = true;
    if (f.phase === 'load') s.resume = f.extra.checkpoint;
  }
  return s;
}

export function render(svg, { frames, index, frame, size }) {
  const d3 = window.d3;
  const { width: W, height: H } = size;
  const plan = frames[0]?.extra;
  if (!plan || plan.steps == null) return;
  const s = story(frames, index);
  const n1 = plan.world_size;
  const n2 = plan.restart_world_size;

  // Rows of steps on top, rank boxes under them.
  const left = textWidth('attempt 2', LABEL) + 18;
  const right = W - 12;
  const ranksH = Math.min(120, Math.max(86, H * 0.3));
  const rowsTop = LABEL + 14;
  const rowsBottom = H - ranksH - LABEL - 22;
  const rowGap = (rowsBottom - rowsTop) / 2;
  const cellH = Math.min(48, rowGap - 2 * LABEL - 16);
  const rowY = (attempt) => rowsTop + (attempt - 1) * rowGap + LABEL + 10;
  const x = d3.scaleLinear().domain([0.5, plan.steps + 0.5]).range([left, right]);
  const colW = x(1.5) - x(0.5);
  const cellW = Math.max(4, colW - Math.min(8, colW * 0.2));
  const cellX = (step) => x(step) - cellW / 2;
  const edge = (step) => x(step + 0.5); // the boundary after a step: where its checkpoint goes

  // Legend line: the schedule.
  svg.append('text').attr('class', 'legend-label').attr('x', left).attr('y', LABEL)
    .text(fit(`checkpoint every ${plan.checkpoint_every === 1 ? 'step' : `${plan.checkpoint_every} steps`} · rank ${plan.failed_rank} dies in step ${plan.fail_at_step}`
      + ` · ${n1} → ${counted(n2, 'rank')}`, right - left, LABEL));

  // Row labels.
  for (const attempt of [1, 2]) {
    if (attempt === 2 && !s.restarted) continue;
    svg.append('text').attr('class', 'lane-label').attr('data-key', `row-${attempt}`)
      .attr('x', 6).attr('y', rowY(attempt) + cellH / 2 + LABEL * 0.35).text(`attempt ${attempt}`);
  }

  // Step cells. Attempt 1: the plan as outlines, filled as steps run; lost and failed ones marked.
  // Lost: the steps after the last checkpoint attempt 1 saved (the one the restart then loads).
  const saved = s.checkpoints.filter((c) => c.attempt === 1).map((c) => c.step);
  const lostFrom = s.resume ?? (saved.length ? Math.max(...saved) : 0);
  const cells = [];
  for (let step = 1; step <= plan.steps; step += 1) {
    let state = s.done[1].has(step) ? 'done' : 'ahead';
    if (s.failure && step === s.failure.step) state = 'failed';
    else if (s.failure && state === 'done' && step > lostFrom) state = 'lost';
    else if (s.failure && state === 'ahead') state = 'never';
    cells.push({ attempt: 1, step, state });
  }
  if (s.restarted && s.resume != null) {
    for (let step = s.resume + 1; step <= plan.steps; step += 1) {
      const ran = s.done[2].has(step);
      cells.push({ attempt: 2, step, state: ran ? (step <= plan.fail_at_step ? 'replayed' : 'done') : 'ahead' });
    }
  }
  const fill = { done: 'var(--accent)', lost: 'var(--danger)', failed: 'var(--danger)', replayed: 'var(--accent-strong)' };
  const g = svg.append('g').attr('class', 'steps');
  for (const c of cells) {
    const rect = g.append('rect').attr('data-key', `step-${c.attempt}-${c.step}`)
      .attr('x', cellX(c.step)).attr('y', rowY(c.attempt)).attr('width', cellW).attr('height', cellH).attr('rx', 3);
    if (fill[c.state]) {
      rect.attr('fill', fill[c.state]).attr('opacity', c.state === 'lost' ? 0.45 : 1);
    } else {
      rect.attr('fill', 'none').attr('stroke', 'var(--fg-muted)').attr('stroke-width', 1.5)
        .attr('stroke-dasharray', '4 3').attr('opacity', c.state === 'never' ? 0.3 : 0.7);
    }
    rect.append('title').text(`attempt ${c.attempt}, step ${c.step}: ${c.state}`);
    if (c.state === 'failed' && cellW >= LABEL) {
      g.append('text').attr('class', 'rank-title').attr('data-key', `cross-${c.step}`).attr('x', x(c.step))
        .attr('y', rowY(1) + cellH / 2 + TITLE * 0.35).attr('text-anchor', 'middle').style('fill', 'var(--bg)').text('✕');
    }
  }
  // Step numbers under the rows, where they fit.
  const every = Math.ceil((textWidth('20', 16) + 8) / colW);
  svg.append('g').attr('class', 'axis').selectAll('text').data(d3.range(1, plan.steps + 1).filter((k) => k % every === 0 || k === 1))
    .join('text').attr('x', (k) => x(k)).attr('y', rowsBottom + LABEL).attr('text-anchor', 'middle').text((k) => k);

  // Checkpoints: a bar after the step they saved, on the row of the attempt that wrote them.
  for (const c of s.checkpoints) {
    const cx = edge(c.step);
    const y0 = rowY(c.attempt) - 8;
    svg.append('line').attr('data-key', `ckpt-${c.step}`).attr('x1', cx).attr('x2', cx).attr('y1', y0)
      .attr('y2', rowY(c.attempt) + cellH + 8).attr('stroke', 'var(--role-grads)').attr('stroke-width', 4)
      .append('title').text(`checkpoint after step ${c.step}: ${c.bytes} bytes written by ${counted(c.ranks, 'rank')}`);
    const label = `saved ${bytes(c.bytes)}`;
    const half = textWidth(label, LABEL) / 2;
    // Centred on its bar, or held inside the view at either end.
    const anchor = cx + half > W - 4 ? 'end' : cx - half < 4 ? 'start' : 'middle';
    svg.append('text').attr('class', 'bar-total').attr('data-key', `ckpt-label-${c.step}`)
      .attr('x', anchor === 'end' ? W - 4 : anchor === 'start' ? 4 : cx)
      .attr('y', y0 - 6).attr('text-anchor', anchor).style('fill', 'var(--role-grads)').text(label);
  }

  // The lost work: a bracket under the row-1 steps since the last checkpoint.
  if (s.failure) {
    const a = cellX(lostFrom + 1);
    const b = cellX(s.failure.step) + cellW;
    const yb = rowY(1) + cellH + 10;
    svg.append('path').attr('data-key', 'lost').attr('d', `M${a},${yb} v8 H${b} v-8`)
      .attr('fill', 'none').attr('stroke', 'var(--danger)').attr('stroke-width', 2.5);
    const lost = s.failure.step - lostFrom;
    svg.append('text').attr('class', 'legend-label').attr('data-key', 'lost-label').attr('x', (a + b) / 2)
      .attr('y', yb + 8 + LABEL + 2).attr('text-anchor', 'middle').style('fill', 'var(--danger)')
      .text(`lost: ${lost} step${lost === 1 ? '' : 's'}`);
  }

  // The restart: from the checkpoint it loads down to the first replayed step.
  if (s.restarted && s.resume != null) {
    const from = edge(s.resume);
    const arrowTop = Math.min(rowY(1) + cellH + 2 * LABEL + 14, rowY(2) - 4); // under the lost label, where there is room
    svg.append('path').attr('class', 'transfer').attr('data-key', 'resume')
      .attr('d', `M${from},${arrowTop} L${from},${rowY(2) + cellH / 2} L${cellX(s.resume + 1) - 4},${rowY(2) + cellH / 2}`);
    svg.append('text').attr('class', 'transfer-label').attr('data-key', 'resume-label')
      .attr('x', from - 8).attr('y', rowY(2) + cellH / 2 + LABEL * 0.35).attr('text-anchor', 'end')
      .text(`load step ${s.resume}`);
  }

  // The rank processes: one box each.
  const ranks = frame.ranks;
  const gap = 10;
  const boxW = Math.min(220, (W - 12 - gap * (ranks.length - 1)) / ranks.length);
  const boxH = ranksH - 10;
  const top = H - ranksH;
  const startX = (W - (boxW * ranks.length + gap * (ranks.length - 1))) / 2;
  ranks.forEach((r, i) => {
    const bx = startX + i * (boxW + gap);
    const failed = r.extra.failed || (s.failure && r.rank === s.failure.rank && !r.extra.member);
    const box = svg.append('g').attr('data-key', `rank-${r.rank}`).attr('transform', `translate(${bx},${top})`)
      .attr('opacity', r.extra.member ? 1 : 0.4);
    box.append('rect').attr('class', 'rank-box').attr('width', boxW).attr('height', boxH).attr('rx', 6)
      .style('stroke', failed ? 'var(--danger)' : null).style('stroke-width', failed ? 3 : null);
    box.append('text').attr('class', 'rank-title').attr('x', 10).attr('y', TITLE + 6)
      .style('fill', failed ? 'var(--danger)' : null).text(fit(`rank ${r.rank}`, boxW - 20, TITLE));
    box.append('text').attr('class', 'rank-status').attr('x', 10).attr('y', TITLE + 6 + LABEL + 8)
      .text(fit(r.status ?? '', boxW - 20, LABEL));
    const detail = rankDetail(r);
    if (detail) {
      box.append('text').attr('class', 'rank-status').attr('x', 10).attr('y', TITLE + 6 + 2 * (LABEL + 8))
        .text(fit(detail, boxW - 20, LABEL));
    }
    box.append('title').text(`rank ${r.rank}: ${r.status ?? ''}${detail ? `, ${detail}` : ''}${r.extra.error ? ` (${r.extra.error})` : ''}`);
  });

  svg.attr('data-lost', s.failure ? s.failure.step - lostFrom : 0).attr('data-checkpoints', s.checkpoints.length)
    .attr('aria-label', `Steps of attempt 1${s.restarted ? ' and 2' : ''}, checkpoints and ranks; ${frame.caption}`);
}

/** A rank's measured fact in this frame: what it wrote, what it holds after a load, how long it took to notice. */
function rankDetail(r) {
  const e = r.extra;
  if (e.wrote) return `wrote ${bytes(e.wrote.bytes)}`;
  if (e.detected_s != null) return `noticed after ${e.detected_s.toFixed(1)} s`;
  if (e.held != null) return `holds ${bytes(e.held)}`;
  return '';
}
