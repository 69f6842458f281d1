/** The run's self-checks under the views: measured beside expected, pass or fail. */
import { measured, ms } from './format.js';

export function renderSummary(container, summary, meta) {
  container.replaceChildren();
  if (!summary) return;
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
  const timing = document.createElement('p');
  timing.className = 'sim-timing';
  const t = summary.timings ?? {};
  timing.textContent = `${meta?.world_size ?? '?'} ranks · ${meta?.backend ?? ''} · run ${ms(t.run_s)}`
    + (t.first_frame_s != null ? ` · first frame ${ms(t.first_frame_s)}` : '')
    + (meta?.source && meta.source !== 'live' ? ` · ${meta.source}` : '');
  container.append(list, timing);
  const figures = Object.entries(summary.figures ?? {});
  if (figures.length) {
    // Every measured-vs-formula figure of the run, folded away so the slide stays calm.
    const details = document.createElement('details');
    details.className = 'sim-figures';
    const title = document.createElement('summary');
    title.textContent = `All ${figures.length} measured figures`;
    const table = document.createElement('dl');
    for (const [name, figure] of figures) {
      const term = Object.assign(document.createElement('dt'), { textContent: name.replace(/_/g, ' ') });
      const value = Object.assign(document.createElement('dd'), { textContent: measured(figure) });
      table.append(term, value);
    }
    details.append(title, table);
    timing.append(' · ', details);
  }
}
