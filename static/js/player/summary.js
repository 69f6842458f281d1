/**
 * The run's self-checks under the views: one line for the audience ("✓ 4 checks passed against a
 * single-process run") that opens the detail (each check, measured beside expected, the run's
 * timing and figures); the detail and the timing also go to the slide's speaker notes.
 */
import { measured, ms } from './format.js';

function checkList(summary) {
  const list = document.createElement('ul');
  list.className = 'sim-checks';
  for (const check of summary.checks) {
    const item = document.createElement('li');
    item.className = check.passed ? 'pass' : 'fail';
    const mark = document.createElement('span');
    mark.className = 'mark';
    mark.textContent = check.passed ? '✓' : '✗';
    mark.setAttribute('aria-label', check.passed ? 'passed' : 'failed');
    const text = document.createElement('span');
    text.textContent = `${check.name}: ${measured(check.measured)}`
      + (check.expected != null ? ` (expected ${measured(check.expected)})` : '');
    if (check.detail) item.title = check.detail;
    item.append(mark, text);
    list.append(item);
  }
  return list;
}

function timingLine(summary, meta) {
  const timing = document.createElement('p');
  timing.className = 'sim-timing';
  const t = summary.timings ?? {};
  const n = meta?.world_size;
  timing.textContent = `${n ?? '?'} ${n === 1 ? 'rank' : 'ranks'} · ${meta?.backend ?? ''} · run ${ms(t.run_s)}`
    + (t.first_frame_s != null ? ` · first frame ${ms(t.first_frame_s)}` : '')
    + (meta?.source && meta.source !== 'live' ? ` · ${meta.source}` : '');
  return timing;
}

function figureList(summary) {
  const table = document.createElement('dl');
  table.className = 'sim-figures';
  for (const [name, figure] of Object.entries(summary.figures ?? {})) {
    const term = Object.assign(document.createElement('dt'), { textContent: name.replace(/_/g, ' ') });
    const value = Object.assign(document.createElement('dd'), { textContent: measured(figure) });
    table.append(term, value);
  }
  return table;
}

/** The one line a slide shows: how many checks passed, and against what. */
export function checksLine(checks) {
  const failed = checks.filter((c) => !c.passed).length;
  const n = checks.length;
  if (!n) return 'No checks in this run';
  if (!failed) return `✓ ${n === 1 ? 'The check' : `${n} checks`} passed against a single-process run`;
  return `✗ ${failed} of ${n} checks failed against a single-process run`;
}

export function renderSummary(container, summary, meta, slide = null) {
  container.replaceChildren();
  if (!summary) return;
  const details = document.createElement('details');
  details.className = 'sim-checks-line';
  const line = document.createElement('summary');
  line.textContent = checksLine(summary.checks);
  line.classList.toggle('fail', summary.checks.some((c) => !c.passed));
  details.append(line, checkList(summary), timingLine(summary, meta));
  if (Object.keys(summary.figures ?? {}).length) details.append(figureList(summary));
  container.append(details);

  // The speaker notes get the whole detail: the presenter sees it, the audience does not.
  // The slide's own notes: not the step line the speaker view keeps first (its text is rewritten
  // at every step, which would wipe the detail).
  const notes = slide?.querySelector('aside.notes:not(.step-note)');
  if (notes) {
    notes.querySelector('.sim-notes')?.remove();
    const block = document.createElement('div');
    block.className = 'sim-notes';
    block.append(Object.assign(document.createElement('p'), { textContent: line.textContent }),
      checkList(summary), timingLine(summary, meta));
    notes.append(block);
  }
}
