/**
 * The projected view: the same run's structure re-timed on a modelled GPU cluster. The live run
 * says which parallelism, how many stages or ranks, which schedule and how many micro-batches;
 * GET /api/estimate/replay (simulations.estimate) times that with a preset model on a cluster of
 * GPUs (the run's own size, or more replicas of it) and returns the step's spans: per pipeline rank
 * (forwards, backwards, W) when the run has stages, layer by layer otherwise, and each kind of
 * communication on a lane of its own (DP reduce, TP collectives, ZeRO-3 gathers, CP's K, V, EP's
 * all-to-all, DiLoCo's outer sync). Real time units, labelled as modelled: the live run's own,
 * measured CPU timeline is the `timeline` view.
 *
 * Drawn for the pane it gets, as the other views are (its viewBox is the pane in slide pixels):
 * the title and figures wrap to the pane's width, lane labels and ticks stay at reading size, and a
 * span is named only where its name fits. A caption under the axis says how far to trust the estimate: its
 * error on published runs of the same kind (the answer's `validation.summary`).
 */
import { ms, value as count } from '../format.js'; // count: 1,024
import { staticSite } from '../source.js';
import { MODEL_NAMES, gpuPlural } from '../../presets.js';
import { fit, textWidth } from './layout.js';

// How context parallelism moves K and V (the estimate's cp_comm), for the header and the CP lane.
const CP_HOW = { ring: 'ring', all_to_all: 'Ulysses all-to-all', all_gather: 'K, V all-gather' };
const CP_LANE = { ring: 'CP ring', all_to_all: 'CP all-to-all', all_gather: 'CP gather' };
// The largest cluster the control offers (the estimator's search target, issue 12).
export const MAX_CLUSTER = 16384;

const FALLBACK = { width: 960, height: 520 };
const TITLE = 22; // slide px: reveal.js scales 1280×720 by about 0.9, so 18 px reads as 16 on screen
const LABEL = 18;
const PAD = 8;
const AXIS = 30; // the time axis under the lanes
const LEGEND = 28; // what the compute lane's colours mean, under the axis

const KIND = {
  F: 'forward', B: 'backward', W: 'weight gradient', opt: 'optimizer step', step: 'inner step',
  wait: 'waiting for the slowest GPU',
  dp: 'DP reduce', tp: 'TP collective', zero3: 'ZeRO-3 gather / reduce-scatter', cp: 'CP communication of K, V',
  ep: 'expert all-to-all', outer: 'outer sync of the pseudo-gradients',
};
// Communication lanes, in this order; a kind not listed still gets a lane, named by its kind.
const COMM_LANE = {
  tp: 'TP comm.', cp: 'CP comm.', ep: 'EP all-to-all', zero3: 'ZeRO-3', dp: 'DP reduce', outer: 'outer sync',
};
const COMM_SHORT = { tp: 'TP', cp: 'CP', ep: 'EP', zero3: 'ZeRO-3', dp: 'DP', outer: 'outer' };
// What the compute lanes' colours mean, for the legend (long name, and a shorter one for narrow panes).
const LEGEND_NAMES = {
  F: ['forward', 'fwd'], B: ['backward', 'bwd'], W: ['weight grad', 'W'], step: ['inner step', 'step'],
  opt: ['optimizer', 'opt'], wait: ['slowest GPU', 'wait'],
};
const FILL = {
  F: 'var(--role-params, #5cc8ff)', B: 'var(--role-grads, #7ee07e)', W: 'var(--role-optimizer, #ffb454)',
  opt: 'var(--fg-muted, #9aa3b2)', step: 'var(--role-params, #5cc8ff)', outer: 'var(--fg, #e8eaed)',
  wait: '#5d6573', // darker than the optimizer's grey: idle, not work
  dp: 'var(--role-activations, #c792ea)', tp: 'var(--danger, #ff6b6b)', zero3: '#8c9eff', // indigo: apart from the weight-grad orange
  cp: '#4dd0b0', ep: 'var(--role-buffer, #ff8fa3)',
};
const OTHER_FILL = 'var(--fg-muted, #9aa3b2)';

const answers = new Map(); // query -> Promise of the estimate (or of an error message)
const known = new Map(); // query -> the estimate, once answered (drawn at once, without a flash)

function gcd(a, b) { return b ? gcd(b, a % b) : a; }

/**
 * The cluster sizes offered for a run whose own size is `own` GPUs: its own, and larger multiples of
 * it (×2, ×8, ×32, ×128, ×512, and 1,024 and 16,384 GPUs where those are multiples), each of whole
 * 8-GPU nodes once it is over 8, up to MAX_CLUSTER.
 */
export function clusterSizes(own, max = MAX_CLUSTER) {
  const node = (own * 8) / gcd(own, 8); // the smallest multiple of the run that is whole nodes
  const sizes = new Set([own]);
  const add = (n) => {
    const whole = n > 8 && n % 8 ? Math.ceil(n / node) * node : n;
    if (whole > own && whole <= max) sizes.add(whole);
  };
  for (const k of [2, 8, 32, 128, 512]) add(own * k);
  for (const n of [1024, 16384]) if (n % node === 0) add(n);
  return [...sizes].sort((a, b) => a - b);
}

function replayQuery(scenario, params, { model = 'llama3-70b', gpu = 'h100-80gb', gpus } = {}) {
  const query = new URLSearchParams({ scenario, model, gpu });
  if (gpus) query.set('gpus', String(gpus));
  for (const [key, value] of Object.entries(params ?? {})) {
    if (key !== 'seed' && value != null) query.set(key, String(value)); // null: the server's default
  }
  return query.toString();
}

/**
 * The replay of `scenario` with the run's `params` on a modelled cluster of `gpu`s, `model` scaled
 * in; `gpus` (optional) the cluster's size, the run scaled by data parallelism (the run's own size
 * without it). Rejects with the server's reason in words.
 */
export function fetchProjection(scenario, params, cluster = {}) {
  const key = replayQuery(scenario, params, cluster);
  if (!answers.has(key)) {
    answers.set(key, fetch(`/api/estimate/replay?${key}`).then(async (response) => {
      const body = await response.json().catch(() => ({}));
      if (!response.ok) {
        throw new Error(typeof body.detail === 'string' ? body.detail  // a static export: needs the server
          : body.detail?.[0]?.msg ?? 'no modelled cluster for this run');
      }
      known.set(key, body);
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

/** A span in a timeline of stages (one span per micro-batch), not one of a layer-by-layer timeline. */
function whole(s) {
  return s.layer == null || s.layer < 0;
}

function spanName(s) {
  const where = whole(s) ? '' : ` of layer ${s.layer}`;
  const which = s.kind === 'step' ? ` ${s.mb + 1}` : s.mb >= 0 ? `, micro-batch ${s.mb}` : '';
  return `${KIND[s.kind] ?? s.kind}${which}${where}`;
}

function spanLabel(s) {
  if (s.stream === 'comm') return COMM_SHORT[s.kind] ?? s.kind;
  if (s.kind === 'step') return `step ${s.mb + 1}`;
  return s.mb >= 0 ? `${s.kind}${s.mb}` : s.kind;
}

/** Words packed into lines of at most `width` px at `size` px; `sep` joins the pieces of a line. */
function wrap(pieces, width, size, sep = ' ') {
  const lines = [];
  for (const piece of pieces) {
    const last = lines[lines.length - 1];
    if (last != null && textWidth(`${last}${sep}${piece}`, size) <= width) lines[lines.length - 1] = `${last}${sep}${piece}`;
    else lines.push(piece);
  }
  return lines;
}

/** "Llama 3 70B on 1,024 H100s, modelled": the title a back-row viewer reads. */
export function title(est) {
  return `${MODEL_NAMES[est.model] ?? est.model} on ${count(est.gpus)} ${gpuPlural(est.gpu, est.gpus)}, modelled`;
}

function figures(est) {
  const cp = est.cp > 1 ? `CP ${est.cp}${CP_HOW[est.cp_comm] ? ` (${CP_HOW[est.cp_comm]})` : ''}` : null;
  const sharding = est.zero_shards && est.zero_shards < est.dp * est.cp
    ? `HSDP: ZeRO-3 over ${count(est.zero_shards)}, replicated ${count(est.dp * est.cp / est.zero_shards)}×`
    : est.zero_stage && est.dp * est.cp > 1 ? `ZeRO-${est.zero_stage}` : null;
  const degrees = [`TP ${est.tp}`, est.pp > 1 ? `PP ${est.pp}` : null, cp,
    est.ep > 1 ? `EP ${est.ep}` : null, `DP ${count(est.dp)}`, sharding].filter(Boolean).join(' · ');
  return [degrees, `step ${seconds(est.step_time_s)}`,
    est.pp > 1 ? `bubble ${(100 * est.bubble_fraction).toFixed(0)} %` : null,
    `MFU ${(100 * est.mfu).toFixed(0)} %`, `exposed comm. ${seconds(est.exposed_comm_s)}`,
    est.fits ? null : 'does not fit in memory'].filter(Boolean);
}

/**
 * How far to trust the estimate, in lines that fit `width`: the estimator's own sentence (its error on published runs
 * of this kind, from its validation tables), or, where that takes more than one line, the same figures said shorter.
 */
function trustCaption(validation, width) {
  if (!validation?.summary) return [];
  const percent = (x) => `${Math.round(100 * x)}\u00a0%`; // no-break spaces: a figure and its unit stay on one line
  const candidates = [`How far to trust it: ${validation.summary}`,
    // The shorter one still names the runs (their kind and GPU): "runs like this" left a reader asking like what.
    `Error on ${count(validation.runs)} published ${validation.scope}: median\u00a0${percent(validation.median_error)}, `
    + `worst\u00a0${percent(validation.worst_error)}`];
  const wrapped = candidates.map((text) => wrap(text.split(' '), width, LABEL));
  return wrapped.find((lines) => lines.length === 1) ?? wrapped.reduce((a, b) => (b.length < a.length ? b : a));
}

function draw(target, est, { width: W, height: H }) {
  const d3 = window.d3;
  target.selectAll('*').remove();
  const spans = est.timeline.map((s, i) => ({
    ...s, id: `${s.stream}-${s.rank}-${s.kind}-${s.stage}-${s.mb}-${s.layer ?? ''}-${i}`,
  }));

  // The title and the step's figures, wrapped to the pane.
  let y = PAD;
  const head = target.append('g').attr('class', 'projected-head');
  for (const line of wrap(title(est).split(' '), W - 2 * PAD, TITLE)) {
    y += TITLE + 4;
    head.append('text').attr('class', 'projected-title').attr('data-keep', '').attr('x', PAD).attr('y', y - 6)
      .style('font-size', `${TITLE}px`).text(line);
  }
  const warning = 'does not fit in memory';
  for (const line of wrap(figures(est), W - 2 * PAD, LABEL, ' · ')) {
    y += LABEL + 6;
    const text = head.append('text').attr('class', 'lane-label projected-figures').attr('data-keep', '').attr('x', PAD)
      .attr('y', y - 6).style('font-size', `${LABEL}px`);
    const [plain, warned] = line.endsWith(warning) ? [line.slice(0, -warning.length), warning] : [line, ''];
    text.append('tspan').text(plain);
    if (warned) text.append('tspan').attr('class', 'projected-warning').text(warned);
  }
  const top = y + 8;

  // Lanes: the compute stream of each pipeline rank, then one lane per kind of communication.
  const lanes = [];
  const ranks = [...new Set(spans.filter((s) => s.stream === 'compute').map((s) => s.rank))].sort((a, b) => a - b);
  for (const r of ranks) lanes.push({ key: `compute-${r}`, label: est.pp > 1 ? `stage ${r}` : 'compute' });
  const commKinds = [...new Set(spans.filter((s) => s.stream === 'comm').map((s) => s.kind))];
  const order = Object.keys(COMM_LANE);
  commKinds.sort((a, b) => (order.indexOf(a) + 1 || 99) - (order.indexOf(b) + 1 || 99));
  const laneName = (kind) => (kind === 'cp' && CP_LANE[est.cp_comm]) || COMM_LANE[kind] || kind;
  for (const kind of commKinds) lanes.push({ key: `comm-${kind}`, label: laneName(kind) });
  const index = new Map(lanes.map((lane, i) => [lane.key, i]));

  // What the compute lanes' colours mean, under the axis: long names when they fit, else short ones.
  const computeKinds = Object.keys(LEGEND_NAMES).filter((k) => spans.some((s) => s.stream === 'compute' && s.kind === k));
  const legendWidth = (i) => d3.sum(computeKinds, (k) => textWidth(LEGEND_NAMES[k][i], LABEL) + 34);
  const legendNames = legendWidth(0) <= W - 2 * PAD ? 0 : 1;
  const legend = computeKinds.length > 1 && legendWidth(legendNames) <= W - 2 * PAD;
  // How far to trust the estimate: its error on published runs of this kind (the API's validation summary,
  // from the estimator's validation tables), in a caption under everything else.
  const trust = trustCaption(est.validation, W - 2 * PAD);
  const CAPTION = LABEL + 8; // a caption line's height: its descenders stay inside the pane
  const bottom = AXIS + (legend ? LEGEND : 0) + trust.length * CAPTION + (trust.length ? 4 : 0);

  const left = PAD + d3.max(lanes, (l) => textWidth(l.label, LABEL)) + 12;
  const end = d3.max(spans, (s) => s.end) || est.step_time_s || 1;
  const x = d3.scaleLinear().domain([0, end]).range([left, W - 14]);
  const lane = Math.max(LABEL + 4, (H - top - bottom) / Math.max(1, lanes.length));
  const laneY = (s) => top + index.get(laneKey(s)) * lane;
  const bar = Math.min(lane * 0.7, 44);

  target.append('g').selectAll('text').data(lanes, (l) => l.key).join('text')
    .attr('class', 'lane-label').attr('x', PAD).attr('y', (l, i) => top + i * lane + lane / 2 + LABEL * 0.35)
    .style('font-size', `${LABEL}px`)
    .text((l) => l.label);
  target.append('g').selectAll('line').data(d3.range(lanes.length + 1)).join('line')
    .attr('class', 'lane-rule').attr('x1', left).attr('x2', W - 14)
    .attr('y1', (i) => top + i * lane).attr('y2', (i) => top + i * lane);
  const groups = target.append('g').selectAll('g').data(spans, (s) => s.id).join('g')
    .attr('class', (s) => `span current ${s.stream === 'comm' ? 'span-comm' : 'span-compute'} span-${s.kind}`);
  groups.append('rect')
    .attr('x', (s) => x(s.start)).attr('width', (s) => Math.max(1, x(s.end) - x(s.start)))
    .attr('y', (s) => laneY(s) + (lane - bar) / 2)
    .attr('height', bar)
    .style('fill', (s) => FILL[s.kind] ?? OTHER_FILL)
    .append('title').text((s) => `${spanName(s)}: ${seconds(s.end - s.start)}`);
  if (bar >= LABEL + 2) {
    groups.filter((s) => whole(s) && x(s.end) - x(s.start) >= textWidth(spanLabel(s), LABEL) + 8).append('text')
      .attr('class', 'span-label').attr('x', (s) => x(s.start) + 4).attr('y', (s) => laneY(s) + lane / 2 + LABEL * 0.35)
      .style('font-size', `${LABEL}px`)
      .text((s) => fit(spanLabel(s), x(s.end) - x(s.start) - 8, LABEL));
  }

  const axisY = top + lanes.length * lane + 4;
  const ticks = Math.max(2, Math.floor((W - left) / 110));
  const axis = d3.axisBottom(x).ticks(ticks).tickFormat((t) => seconds(t));
  target.append('g').attr('class', 'axis').attr('transform', `translate(0,${axisY})`).call(axis);
  // A tick at either end of the axis keeps its whole label inside the view: anchored at its end.
  const tickPx = parseFloat(getComputedStyle(target.select('.axis .tick text').node() ?? target.node()).fontSize) || 16;
  target.selectAll('.axis .tick text').each(function anchor(t) {
    const half = textWidth(seconds(t), tickPx) / 2;
    if (x(t) + half > W - 2) d3.select(this).attr('text-anchor', 'end').attr('dx', '0.3em');
    else if (x(t) - half < 2) d3.select(this).attr('text-anchor', 'start').attr('dx', '-0.3em');
  });

  if (legend) {
    let lx = W - 14;
    for (const k of [...computeKinds].reverse()) {
      const text = LEGEND_NAMES[k][legendNames];
      lx -= textWidth(text, LABEL) + 34;
      const g = target.append('g').attr('class', `legend legend-${k}`).attr('transform', `translate(${lx},${axisY + AXIS + LEGEND - 12})`);
      g.append('rect').attr('y', -15).attr('width', 16).attr('height', 16).style('fill', FILL[k]);
      g.append('text').attr('class', 'legend-label').attr('x', 22).attr('y', 0).style('font-size', `${LABEL}px`).text(text);
    }
  }
  const captionTop = axisY + AXIS + (legend ? LEGEND : 0);
  trust.forEach((line, i) => {
    target.append('text').attr('class', 'projected-trust').attr('data-keep', '').attr('x', PAD)
      .attr('y', captionTop + i * CAPTION + LABEL).style('font-size', `${LABEL}px`).text(line);
  });
  mark(target, { spans: spans.length, label: title(est) });
}

/** Say what the view shows on the layer and on its SVG (where the player and the tests read it). */
function mark(target, { spans = null, error = null, label = error }) {
  const nodes = [target.node(), target.node().ownerSVGElement].filter(Boolean);
  for (const node of nodes) {
    for (const [name, value] of [['data-spans', spans], ['data-error', error], ['aria-label', label]]) {
      if (value == null) node.removeAttribute(name);
      else node.setAttribute(name, value);
    }
  }
}

function message(target, text, { width: W }) {
  target.selectAll('*').remove();
  wrap(text.split(' '), W - 2 * PAD, 20).forEach((line, i) => {
    target.append('text').attr('class', 'lane-label projected-message').attr('x', PAD).attr('y', 36 + i * 28)
      .style('font-size', '20px').text(line);
  });
  mark(target, { error: text });
}

/** The estimator's refusal of a cluster size, in words: "12 GPUs cannot model this run: gpus must be …". */
function refusal(error, gpus) {
  if (!gpus || !/^gpus:/.test(error.message)) return error.message;
  const why = error.message.replace(/^gpus:\s*/, '');
  return `${count(gpus)} GPUs cannot model this run: the GPU count ${why}`;
}

/**
 * `cluster` ({ model, gpu, gpus }): the preset, GPU and cluster size to model; Llama 3 70B on the run's
 * own number of H100s by default. `size`: the pane, in slide pixels (the SVG's viewBox). Returns a
 * promise that resolves once the view is drawn (the estimate answered, or the reason it was not).
 */
export function render(svg, { meta, cluster, size }) {
  if (!meta) return Promise.resolve();
  const node = svg.node ? svg.node() : svg;
  const target = window.d3.select(node);
  const pane = size ?? FALLBACK;
  if (staticSite) { // no estimator in a static copy: say so at once (print copies the page right away)
    message(target, 'The modelled cluster needs the live server; this copy has the measured run only.', pane);
    return Promise.resolve();
  }
  const answered = known.get(replayQuery(meta.scenario, meta.params, cluster));
  if (answered) { // drawn at once: the same picture again is no change to animate
    draw(target, answered, pane);
    return Promise.resolve();
  }
  return fetchProjection(meta.scenario, meta.params, cluster).then(
    (est) => { if (node.isConnected) draw(target, est, pane); },
    (error) => { if (node.isConnected) message(target, refusal(error, cluster?.gpus), pane); },
  );
}
