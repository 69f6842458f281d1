/**
 * The projected view: the same run's structure re-timed on a modelled GPU cluster. The live run
 * says which parallelism, how many stages or ranks, which schedule and how many micro-batches;
 * GET /api/estimate/replay (simulations.estimate) times that with a preset model on H100s and
 * returns the step's spans: per pipeline rank (forwards, backwards, W) when the run has stages,
 * layer by layer otherwise, and each kind of communication on a lane of its own (DP buckets, TP
 * collectives, ZeRO-3 gathers one layer ahead, CP's ring). Real time units, labelled as modelled:
 * the live run's own, measured CPU timeline is the `timeline` view.
 */
import { ms } from '../format.js';
import { staticSite } from '../source.js';

const W = 960;
const H = 520;
const LEFT = 152; // lane labels; the time axis starts past them
const TOP = 80;
const AXIS = 44;
const KIND = {
  F: 'forward', B: 'backward', W: 'weight grad', opt: 'optimizer step', dp: 'DP reduce', tp: 'TP collective',
  zero3: 'ZeRO-3 gather / reduce-scatter', cp: 'CP ring of K, V',
};
const COMM_LANE = { tp: 'TP comm.', zero3: 'ZeRO-3', dp: 'DP reduce', cp: 'CP ring' };
const FILL = {
  F: 'var(--role-params, #5cc8ff)', B: 'var(--role-grads, #7ee07e)', W: 'var(--role-optimizer, #ffb454)',
  opt: 'var(--fg-muted, #9aa4b2)', dp: 'var(--role-activations, #c792ea)', tp: 'var(--danger, #ff6b6b)',
  zero3: 'var(--accent, #5cc8ff)', cp: 'var(--accent-strong, #ffd166)',
};
const answers = new Map(); // query -> Promise of the estimate (or of an error message)

/** The replay of `scenario` with the run's `params` on a modelled cluster of `gpu`s, `model` scaled in. */
export function fetchProjection(scenario, params, { model = 'llama3-70b', gpu = 'h100-80gb' } = {}) {
  const query = new URLSearchParams({ scenario, model, gpu });
  for (const [key, value] of Object.entries(params ?? {})) {
    if (key !== 'seed' && value != null) query.set(key, String(value)); // null: the server's default
  }
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

function laneKey(s) {
  return s.stream === 'compute' ? `compute-${s.rank}` : `comm-${s.kind}`;
}

function spanName(s) {
  const where = s.layer == null || s.layer < 0 ? '' : ` of layer ${s.layer}`;
  return `${KIND[s.kind] ?? s.kind}${where}${s.mb >= 0 ? `, micro-batch ${s.mb}` : ''}`;
}

function draw(svg, est) {
  const d3 = window.d3;
  svg.selectAll('*').remove();
  const spans = est.timeline.map((s, i) => ({
    ...s, id: `${s.stream}-${s.rank}-${s.kind}-${s.stage}-${s.mb}-${s.layer ?? ''}-${i}`,
  }));
  // lanes: the compute stream of each pipeline rank, then one lane per kind of communication
  const lanes = [];
  const add = (key, label) => lanes.push({ key, label });
  const ranks = [...new Set(spans.filter((s) => s.stream === 'compute').map((s) => s.rank))].sort((a, b) => a - b);
  for (const r of ranks) add(`compute-${r}`, est.pp > 1 ? `stage ${r}` : 'compute');
  for (const kind of Object.keys(COMM_LANE)) {
    if (spans.some((s) => s.stream === 'comm' && s.kind === kind)) add(`comm-${kind}`, COMM_LANE[kind]);
  }
  const index = new Map(lanes.map((lane, i) => [lane.key, i]));
  const end = d3.max(spans, (s) => s.end);
  const x = d3.scaleLinear().domain([0, end]).range([LEFT, W - 16]);
  const lane = (H - TOP - AXIS) / lanes.length;
  const y = (s) => TOP + index.get(laneKey(s)) * lane;
  const degrees = [`TP ${est.tp}`, est.pp > 1 ? `PP ${est.pp}` : null, est.cp > 1 ? `CP ${est.cp}` : null,
    `DP ${est.dp}`, est.zero_stage && est.dp * est.cp > 1 ? `ZeRO-${est.zero_stage}` : null].filter(Boolean).join(' · ');
  svg.append('text').attr('class', 'lane-label').attr('x', 8).attr('y', 28).style('font-size', '27px')
    .text(`modelled: ${est.gpus} × ${est.gpu}, ${est.model}, ${degrees}`);
  svg.append('text').attr('class', 'lane-label').attr('x', 8).attr('y', 62).style('font-size', '25px')
    .text(`step ${seconds(est.step_time_s)} · `
      + (est.pp > 1 ? `bubble ${(100 * est.bubble_fraction).toFixed(0)} % · ` : '')
      + `MFU ${(100 * est.mfu).toFixed(0)} % · exposed comm. ${seconds(est.exposed_comm_s)}`
      + (est.fits ? '' : ' · does not fit in memory'));
  svg.append('g').selectAll('text').data(lanes, (l) => l.key).join('text')
    .attr('class', 'lane-label').attr('x', 8).attr('y', (l, i) => TOP + i * lane + lane / 2 + 9)
    .style('font-size', lanes.length > 5 ? '21px' : '25px')
    .text((l) => l.label);
  const groups = svg.append('g').selectAll('g').data(spans, (s) => s.id).join('g')
    .attr('class', (s) => `span ${s.stream === 'comm' ? 'span-comm' : 'span-compute'} span-${s.kind}`);
  groups.append('rect')
    .attr('x', (s) => x(s.start)).attr('width', (s) => Math.max(1, x(s.end) - x(s.start)))
    .attr('y', (s) => y(s) + lane * 0.15)
    .attr('height', lane * 0.7)
    .style('fill', (s) => FILL[s.kind] ?? FILL.dp)
    .append('title').text((s) => `${spanName(s)}: ${seconds(s.end - s.start)}`);
  groups.filter((s) => x(s.end) - x(s.start) > 44 && s.layer == null).append('text')
    .attr('class', 'span-label').attr('x', (s) => x(s.start) + 4).attr('y', (s) => y(s) + lane / 2 + 9)
    .style('font-size', '24px')
    .text((s) => (s.stream === 'comm' ? 'DP' : s.kind === 'opt' ? 'opt' : `${s.kind}${s.mb}`));
  const axis = d3.axisBottom(x).ticks(6).tickFormat((t) => seconds(t));
  svg.append('g').attr('class', 'axis').attr('transform', `translate(0,${H - AXIS + 4})`).call(axis)
    .selectAll('text').style('font-size', '24px');
  svg.attr('data-spans', spans.length);
}

function message(target, text) {
  target.selectAll('*').remove();
  target.append('text').attr('class', 'lane-label').attr('x', 8).attr('y', 40).text(text);
}

/** `cluster` ({ model, gpu }): the preset and GPU to model; Llama 3 70B on H100s by default. */
export function render(svg, { meta, cluster }) {
  if (!meta) return;
  const node = svg.node ? svg.node() : svg;
  const target = window.d3.select(node);
  if (staticSite) { // no estimator in a static copy: say so at once (print copies the page right away)
    message(target, 'The modelled cluster needs the live server; this copy has the measured run only.');
    return;
  }
  fetchProjection(meta.scenario, meta.params, cluster).then(
    (est) => { if (node.isConnected) draw(target, est); },
    (error) => message(target, error.message),
  );
}
