/**
 * The projected view: the same run's structure re-timed on a modelled GPU cluster. The live run
 * says which parallelism, how many stages or ranks, which schedule and how many micro-batches;
 * GET /api/estimate/replay (simulations.estimate) times that with a preset model on H100s and
 * returns the step's spans per pipeline rank: forwards, backwards (and W), and the data-parallel
 * reduction on its own stream. Real time units, labelled as modelled: the live run's own, measured
 * CPU timeline is the `timeline` view.
 */
import { ms } from '../format.js';

const W = 960;
const H = 520;
const LEFT = 112;
const TOP = 80;
const AXIS = 44;
const KIND = { F: 'forward', B: 'backward', W: 'weight grad', dp: 'DP reduce' };
const FILL = {
  F: 'var(--role-params, #5cc8ff)', B: 'var(--role-grads, #7ee07e)', W: 'var(--role-optimizer, #ffb454)',
  dp: 'var(--role-activations, #c792ea)',
};
const answers = new Map(); // query -> Promise of the estimate (or of an error message)

function fetchProjection(scenario, params) {
  const query = new URLSearchParams({ scenario, model: 'llama3-70b', gpu: 'h100-80gb' });
  for (const [key, value] of Object.entries(params ?? {})) if (key !== 'seed') query.set(key, String(value));
  const key = query.toString();
  if (!answers.has(key)) {
    answers.set(key, fetch(`/api/estimate/replay?${key}`).then(async (response) => {
      const body = await response.json().catch(() => ({}));
      if (!response.ok) {
        throw new Error(typeof body.detail === 'string' ? body.detail  // a static export: needs the server
          : body.detail?.[0]?.msg ?? 'no modelled cluster for this run');
      }
      return body;
    }));
  }
  return answers.get(key);
}

function seconds(s) {
  if (s === 0) return '0';
  return s >= 1 ? `${s.toFixed(s < 10 ? 2 : 1)} s` : ms(s);
}

function draw(svg, est) {
  const d3 = window.d3;
  svg.selectAll('*').remove();
  const spans = est.timeline.map((s, i) => ({ ...s, id: `${s.stream}-${s.rank}-${s.kind}-${s.stage}-${s.mb}-${i}` }));
  const ranks = Math.max(1, d3.max(spans, (s) => s.rank + 1));
  const end = d3.max(spans, (s) => s.end);
  const x = d3.scaleLinear().domain([0, end]).range([LEFT, W - 16]);
  const lane = (H - TOP - AXIS) / ranks;
  const y = (r) => TOP + r * lane;
  svg.append('text').attr('class', 'lane-label').attr('x', 8).attr('y', 28).style('font-size', '27px')
    .text(`modelled: ${est.gpus} × ${est.gpu}, ${est.model}, TP ${est.tp} · PP ${est.pp} · DP ${est.dp}`);
  svg.append('text').attr('class', 'lane-label').attr('x', 8).attr('y', 62).style('font-size', '25px')
    .text(`step ${seconds(est.step_time_s)} · bubble ${(100 * est.bubble_fraction).toFixed(0)} % · `
      + `MFU ${(100 * est.mfu).toFixed(0)} % · exposed comm. ${seconds(est.exposed_comm_s)}`);
  svg.append('g').selectAll('text').data(d3.range(ranks)).join('text')
    .attr('class', 'lane-label').attr('x', 8).attr('y', (r) => y(r) + lane / 2 + 9).style('font-size', '25px')
    .text((r) => (est.pp > 1 ? `stage ${r}` : `rank ${r}`));
  const groups = svg.append('g').selectAll('g').data(spans, (s) => s.id).join('g')
    .attr('class', (s) => `span ${s.stream === 'comm' ? 'span-comm' : 'span-compute'}`);
  groups.append('rect')
    .attr('x', (s) => x(s.start)).attr('width', (s) => Math.max(1.5, x(s.end) - x(s.start)))
    .attr('y', (s) => y(s.rank) + (s.stream === 'comm' ? lane * 0.55 : lane * 0.12))
    .attr('height', (s) => (s.stream === 'comm' ? lane * 0.3 : lane * 0.5))
    .style('fill', (s) => FILL[s.kind] ?? FILL.dp)
    .append('title').text((s) => `${KIND[s.kind] ?? s.kind}${s.mb >= 0 ? ` of micro-batch ${s.mb}` : ''}: `
      + `${seconds(s.end - s.start)}`);
  groups.filter((s) => x(s.end) - x(s.start) > 44).append('text').attr('class', 'span-label')
    .attr('x', (s) => x(s.start) + 4).attr('y', (s) => y(s.rank) + lane * 0.12 + 26).style('font-size', '24px')
    .text((s) => (s.stream === 'comm' ? 'DP' : `${s.kind}${s.mb}`));
  const axis = d3.axisBottom(x).ticks(6).tickFormat((t) => seconds(t));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(0,${H - AXIS + 4})`).call(axis)
    .selectAll('text').style('font-size', '24px');
  svg.attr('data-spans', spans.length);
}

export function render(svg, { meta }) {
  if (!meta) return;
  const node = svg.node ? svg.node() : svg;
  const target = window.d3.select(node);
  fetchProjection(meta.scenario, meta.params).then(
    (est) => { if (node.isConnected) draw(target, est); },
    (error) => {
      target.selectAll('*').remove();
      target.append('text').attr('class', 'lane-label').attr('x', 8).attr('y', 40).text(error.message);
    },
  );
}
