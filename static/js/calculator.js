/**
 * The memory calculator widget: inputs -> bytes per GPU by role, one stacked bar per ZeRO stage,
 * against the capacity lines of the GPU catalog (simulations.hardware.MEMORY_LINES, handed to the page in the
 * element's `data-memory-lines`). The selected stage is highlighted.
 *
 * The numbers are REFERENCE.md's formulas, computed in the page so that the calculator works
 * without a server (a static copy, a blog): `calculate` follows simulations.formulas.per_gpu_memory
 * and app/calculator.calculate operation for operation, and
 * tests/browser/test_calculator_formulas.py checks that the two give the same bytes over a grid
 * of inputs (and that the bounds below are the API's). GET /api/calculator answers the same.
 *
 * Mounts on every `.memory-calculator` element; `data-params` (JSON) sets the initial inputs, and
 * `data-fields` (JSON, optional) names the only inputs to show: the others keep their values but stay
 * out of sight, so a calculator beside a run in a half-width column shows a few inputs, large.
 */

import { buildForm } from './form-fields.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
const ROLES = ['parameters', 'gradients', 'optimizer', 'activations'];
const ROLE_VARS = {
  parameters: 'var(--role-params, #5cc8ff)',
  gradients: 'var(--role-grads, #7ee07e)',
  optimizer: 'var(--role-optimizer, #ffb454)',
  activations: 'var(--role-activations, #c792ea)',
};
const STAGE_NAMES = ['DDP', 'ZeRO-1', 'ZeRO-2', 'ZeRO-3'];

// -- the formulas (simulations/formulas.py; sources in REFERENCE.md) ------------------------------

const GB = 1e9; // decimal gigabytes, as spec sheets count
/**
 * Model shapes (formulas.PRESETS): 1B Llama 3.2 1B, 7B Llama 2 7B, 70B Llama 3 70B, 405B Llama 3.1
 * 405B; `params` is the nominal Ψ of the Playbook's memory table.
 */
export const PRESETS = {
  '1B': { params: 1e9, hidden: 2048, layers: 16, heads: 32, vocab: 128256 },
  '7B': { params: 7e9, hidden: 4096, layers: 32, heads: 32, vocab: 32000 },
  '70B': { params: 70e9, hidden: 8192, layers: 80, heads: 64, vocab: 128256 },
  '405B': { params: 405e9, hidden: 16384, layers: 126, heads: 128, vocab: 128256 },
};
const MODEL_STATE_ROLES = ['parameters', 'gradients', 'optimizer'];

/** Bytes per parameter by role: bf16 mixed precision with Adam 2 + 2 + 12; fp32 4 + 4 + 8 (ZeRO paper). */
export function bytesPerParameter(precision) {
  return precision === 'fp32' ? { parameters: 4, gradients: 4, optimizer: 8 }
    : { parameters: 2, gradients: 2, optimizer: 12 };
}

/** ZeRO stage 1 shards the optimizer states, 2 also the gradients, 3 also the parameters. */
export function shardedRoles(stage) {
  return new Set(stage ? MODEL_STATE_ROLES.slice(3 - stage) : []);
}

/** Playbook: N = h·v + L·(12h² + 13h) + 2h. */
export function transformerParams(hidden, layers, vocab) {
  return hidden * vocab + layers * (12 * hidden ** 2 + 13 * hidden) + 2 * hidden;
}

function modelStateBytes(psi, precision, stage, ranks, cpuOffload) {
  const sharded = shardedRoles(stage);
  const perRank = {};
  for (const [role, k] of Object.entries(bytesPerParameter(precision))) {
    perRank[role] = k * psi / (sharded.has(role) ? ranks : 1);
  }
  if (cpuOffload) perRank.optimizer = 0;
  return perRank;
}

/**
 * Korthikanti et al.: s·b·h·(34 + 5·a·s/h) per layer, /t with SP; full recomputation 2·s·b·h.
 * FlashAttention never stores the a·s² scores, so the 5·a·s/h term goes (Ultra-Scale Playbook).
 */
function activationBytes(seq, microBatch, hidden, heads, layers, tp, pp, full, flash) {
  const sbh = seq * microBatch * hidden;
  const scores = flash ? 0 : 5 * heads * seq / hidden;
  const perLayer = (full ? 2 * sbh : sbh * (34 + scores)) / tp;
  // 1F1B: L/p layers per stage, p micro-batches in flight on the first stage.
  return perLayer * (layers / pp) * pp;
}

/** Bytes per GPU by role, host bytes, total and fit, as GET /api/calculator answers them. */
export function calculate(p, memoryLines) {
  const tp = p.tp ?? 1;
  const pp = p.pp ?? 1;
  const gpus = p.gpus ?? 8;
  const stage = p.zero_stage ?? 0;
  const precision = p.precision ?? 'bf16';
  let shape;
  let psi;
  if (p.model === 'custom' && p.psi != null && p.hidden == null) {
    shape = { hidden: 0, layers: 0, heads: 0, vocab: 0 }; // model states only
    psi = p.psi;
  } else if (p.model === 'custom') {
    shape = { hidden: p.hidden, layers: p.layers, heads: p.heads, vocab: p.vocab };
    psi = p.psi || transformerParams(p.hidden, p.layers, p.vocab);
  } else {
    shape = PRESETS[p.model ?? '7B'];
    psi = shape.params;
  }
  const dp = Math.floor(gpus / (tp * pp));
  const perGpu = modelStateBytes(psi / (tp * pp), precision, stage, dp, Boolean(p.cpu_offload));
  perGpu.activations = 0;
  if (shape.layers) {
    perGpu.activations = activationBytes(p.seq_len ?? 4096, p.micro_batch ?? 1, shape.hidden, shape.heads,
      shape.layers, tp, pp, Boolean(p.activation_checkpointing), p.flash_attention ?? true);
    if (precision === 'fp32') perGpu.activations *= 2;
  }
  const total = ROLES.reduce((sum, role) => sum + perGpu[role], 0);
  const sharded = shardedRoles(stage);
  const k = bytesPerParameter(precision);
  const terms = MODEL_STATE_ROLES.filter((role) => !(role === 'optimizer' && p.cpu_offload))
    .map((role) => `${k[role]}Ψ'${sharded.has(role) ? `/${dp}` : ''}`);
  return {
    psi, dp, per_gpu: perGpu, total,
    // DeepSpeed's ZeRO-Offload keeps fp32 master, momentum and variance (12Ψ) on the host.
    host_per_gpu: p.cpu_offload ? 12 * (psi / (tp * pp)) / (stage >= 1 ? dp : 1) : 0,
    capacities: Object.entries(memoryLines).map(([name, bytes]) => ({ name, bytes, fits: total <= bytes })),
    formula: `${terms.join(' + ')} + activations, Ψ' = Ψ/(tp·pp) = Ψ/${tp * pp}`,
  };
}

// -- the inputs (bounds as app/calculator.CalculatorParams) ----------------------------------------

export const FIELDS = [
  { name: 'model', label: 'Model', type: 'select', options: ['1B', '7B', '70B', '405B', 'custom'], value: '7B' },
  { name: 'psi', label: 'Ψ', type: 'number', min: 1, max: 1e13, custom: true },
  { name: 'hidden', label: 'hidden', type: 'number', min: 64, max: 65536, custom: true },
  { name: 'layers', label: 'layers', type: 'number', min: 1, max: 1024, custom: true },
  { name: 'heads', label: 'heads', type: 'number', min: 1, max: 1024, custom: true },
  { name: 'vocab', label: 'vocab', type: 'number', min: 1, max: 1048576, custom: true },
  { name: 'precision', label: 'Precision', type: 'select', options: ['bf16', 'fp32'], value: 'bf16' },
  { name: 'zero_stage', label: 'ZeRO', type: 'select', options: ['0', '1', '2', '3'], value: '3' },
  { name: 'gpus', label: 'GPUs', type: 'number', min: 1, max: 131072, value: 8 },
  { name: 'tp', label: 'TP', type: 'number', min: 1, max: 64, value: 1 },
  { name: 'pp', label: 'PP', type: 'number', min: 1, max: 256, value: 1 },
  { name: 'seq_len', label: 'seq', type: 'number', min: 1, max: 1048576, value: 4096 },
  { name: 'micro_batch', label: 'micro-batch', type: 'number', min: 1, max: 1024, value: 1 },
  { name: 'activation_checkpointing', label: 'checkpointing', type: 'checkbox', value: false },
  { name: 'flash_attention', label: 'FlashAttention', type: 'checkbox', value: true },
  { name: 'cpu_offload', label: 'CPU offload', type: 'checkbox', value: false },
];
const CUSTOM_SHAPE = ['hidden', 'layers', 'heads', 'vocab'];

/** The inputs' problem, in words naming the field and its bound; null when they are fine. */
export function validate(p) {
  const custom = p.model === 'custom';
  for (const field of FIELDS) {
    if (field.type !== 'number' || (field.custom && !custom)) continue;
    const value = p[field.name];
    if (value == null) continue;
    if (!Number.isInteger(value)) return `${field.label}: a whole number, please (got ${value})`;
    if (value < field.min) return `${field.label}: at least ${field.min.toLocaleString('en-US')} (got ${value})`;
    if (value > field.max) return `${field.label}: at most ${field.max.toLocaleString('en-US')} (got ${value})`;
  }
  const tp = p.tp ?? 1;
  const pp = p.pp ?? 1;
  if ((p.gpus ?? 8) % (tp * pp)) return `GPUs: a multiple of TP·PP = ${tp * pp} (got ${p.gpus})`;
  if (custom && p.psi == null) {
    const missing = CUSTOM_SHAPE.filter((name) => p[name] == null);
    if (missing.length) return `A custom model needs Ψ, or all of hidden, layers, heads and vocab (missing ${missing.join(', ')})`;
  }
  return null;
}

// -- formatting ------------------------------------------------------------------------------------

export function formatBytes(bytes) {
  const v = bytes / GB;
  if (v >= 1) return `${v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString('en-US')} GB`;
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(1)} MB`;
  if (bytes >= 1e3) return `${(bytes / 1e3).toFixed(2)} kB`;
  return `${Math.round(bytes)} B`;
}

/** A parameter count as people say it: 7e10 -> "70 B", 4610 -> "4,610". */
export function formatCount(n) {
  const units = [[1e12, 'T'], [1e9, 'B'], [1e6, 'M']];
  for (const [size, unit] of units) {
    if (n >= size) return `${Number((n / size).toPrecision(3)).toLocaleString('en-US')} ${unit}`;
  }
  return Math.round(n).toLocaleString('en-US');
}

function svgEl(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text != null) el.textContent = text;
  return el;
}

// -- the widget ------------------------------------------------------------------------------------

class Calculator {
  constructor(root) {
    this.root = root;
    let initial = {};
    try { initial = JSON.parse(root.dataset.params || '{}'); } catch { initial = {}; }
    let shown = null;
    try { shown = root.dataset.fields ? new Set(JSON.parse(root.dataset.fields)) : null; } catch { shown = null; }
    this.shown = shown;
    // The capacity lines come from the one GPU catalog, written into the page by the server.
    this.memoryLines = JSON.parse(root.dataset.memoryLines);
    // A few inputs can be read from the back row; the full form is for the calculator's own slide.
    const fontSize = shown ? '0.75em' : '0.5em';
    this.form = document.createElement('form');
    this.form.className = 'calc-form';
    // Inline layout so the widget needs no stylesheet of its own (colours come from the deck's variables).
    Object.assign(this.form.style, { display: 'flex', flexWrap: 'wrap', gap: '0.3em 1em', fontSize,
                                     alignItems: 'center' });
    this.inputs = buildForm(this.form, FIELDS, initial, () => this.update(), {
      labelClass: (field) => `calc-field${field.custom ? ' calc-custom' : ''}`,
      width: (field) => (field.name === 'psi' ? '9em' : '5.5em'),
      inheritFont: Boolean(shown),
    });
    this.svg = svgEl('svg', { viewBox: '0 0 960 320', class: 'calc-chart', role: 'img',
                              'aria-label': 'Bytes per GPU by role for ZeRO stages 0 to 3' });
    this.message = Object.assign(document.createElement('p'), { className: 'calc-message' });
    this.message.style.fontSize = shown ? '0.7em' : '0.5em';
    this.svg.style.fontSize = '20px';
    this.message.setAttribute('aria-live', 'polite');
    root.replaceChildren(this.form, this.svg, this.message);
    this.update();
    // A slide far from the current one is not laid out (width 0): draw again once it has a width.
    let drawnAt = root.clientWidth;
    new ResizeObserver(() => {
      if (root.clientWidth && root.clientWidth !== drawnAt) { drawnAt = root.clientWidth; this.update(); }
    }).observe(root);
  }

  params() {
    const custom = this.inputs.model.value === 'custom';
    const params = {};
    for (const field of FIELDS) {
      const input = this.inputs[field.name];
      if (field.custom && !custom) continue;
      if (field.type === 'checkbox') params[field.name] = input.checked;
      else if (field.type === 'number') params[field.name] = input.value === '' ? null : Number(input.value);
      else params[field.name] = input.value;
    }
    params.zero_stage = Number(params.zero_stage);
    return params;
  }

  update() {
    const custom = this.inputs.model.value === 'custom';
    for (const el of this.form.querySelectorAll('.calc-custom')) el.hidden = !custom;
    if (this.shown) {
      for (const [name, input] of Object.entries(this.inputs)) input.closest('label').hidden = !this.shown.has(name);
    }
    const params = this.params();
    const problem = validate(params);
    if (problem) {
      this.svg.replaceChildren();
      this.message.textContent = problem;
      this.message.classList.add('calc-error');
      return;
    }
    const results = [0, 1, 2, 3].map((stage) => calculate({ ...params, zero_stage: stage }, this.memoryLines));
    this.draw(results, params.zero_stage);
  }

  draw(results, selected) {
    const svg = this.svg;
    svg.replaceChildren();
    // Drawn for the width it gets (a half-slide column too): viewBox units stay the slide's pixels,
    // so the labels keep their size instead of shrinking with the chart.
    const width = Math.round(Math.min(960, Math.max(560, this.root.clientWidth || 960)));
    svg.setAttribute('viewBox', `0 0 ${width} 320`);
    const left = 100, right = width - 40, top = 56, rowH = 46, gap = 12;
    const capacities = results[0].capacities;
    const maxTotal = Math.max(...results.map((r) => r.total));
    const showCapacity = maxTotal >= 1e9;
    const axisMax = Math.max(maxTotal, showCapacity ? capacities.at(-1).bytes : 0) * 1.08 || 1;
    const x = (bytes) => left + (bytes / axisMax) * (right - left);

    // Bars first, then the capacity lines over them, then every label on a halo over both.
    const labels = [];
    results.forEach((result, stage) => {
      const y = top + stage * (rowH + gap);
      const row = svgEl('g', { class: `calc-row${stage === selected ? ' calc-selected' : ''}` });
      labels.push(svgEl('text', { x: left - 12, y: y + rowH / 2 + 7, 'text-anchor': 'end',
                                  'font-weight': stage === selected ? 'bold' : 'normal', fill: 'currentColor' },
                        STAGE_NAMES[stage]));
      let at = 0;
      for (const role of ROLES) {
        const value = result.per_gpu[role] ?? 0;
        if (value <= 0) continue;
        const rect = svgEl('rect', { x: x(at), y, width: Math.max(x(at + value) - x(at), 0.5), height: rowH,
                                     fill: ROLE_VARS[role], opacity: stage === selected ? 1 : 0.55 });
        rect.append(svgEl('title', {}, `${role}: ${formatBytes(value)}`));
        row.append(rect);
        at += value;
      }
      // The total sits after its bar (past any capacity line it would cross); a bar that reaches the
      // right edge carries it inside.
      const text = formatBytes(result.total);
      const inside = x(at) + 8 > right - 90;
      let tx = x(at) + 8;
      for (const cx of showCapacity ? capacities.map((c) => x(c.bytes)).sort((a, b) => a - b) : []) {
        if (!inside && cx > tx - 6 && cx < tx + text.length * 11 + 6) tx = cx + 8;
      }
      labels.push(svgEl('text', { x: inside ? x(at) - 8 : tx, y: y + rowH / 2 + 7,
                                  'text-anchor': inside ? 'end' : 'start', fill: 'currentColor' },
                        text));
      svg.append(row);
    });

    if (showCapacity) {
      // Two lines can sit close together (80 and 141 GB on a 1 TB axis): the left one's label goes to
      // the left of its line, the right one's to the right, so they never print over each other.
      const lines = capacities.map((c) => ({ ...c, cx: x(c.bytes) })).sort((a, b) => a.cx - b.cx);
      lines.forEach((capacity, i) => {
        svg.append(svgEl('line', { x1: capacity.cx, x2: capacity.cx, y1: top - 14, y2: top + 4 * (rowH + gap) - gap + 6,
                                   stroke: 'currentColor', 'stroke-dasharray': '5 4', 'stroke-width': 1.5 }));
        const leftOfLine = lines.length > 1 && i === 0;
        labels.push(svgEl('text', { x: capacity.cx + (leftOfLine ? -6 : 6), y: top - 20,
                                    'text-anchor': leftOfLine ? 'end' : 'start', fill: 'currentColor', 'font-size': 18 },
                          `${capacity.name} ${formatBytes(capacity.bytes)}`));
      });
    }
    for (const label of labels) {
      label.setAttribute('stroke', 'var(--bg, #10131a)');
      label.setAttribute('stroke-width', '5');
      label.setAttribute('stroke-linejoin', 'round');
      label.setAttribute('paint-order', 'stroke');
      svg.append(label);
    }
    // Legend.
    let lx = 10;
    for (const role of ROLES) {
      svg.append(svgEl('rect', { x: lx, y: 294, width: 16, height: 16, fill: ROLE_VARS[role] }));
      svg.append(svgEl('text', { x: lx + 22, y: 308, fill: 'currentColor', 'font-size': 18 }, role));
      lx += Math.min(170, (width - 10) / ROLES.length);
    }

    const chosen = results[selected];
    const fits = chosen.capacities.map((c) => `${c.name}: ${c.fits ? 'fits' : 'does not fit'}`).join(' · ');
    const host = chosen.host_per_gpu > 0 ? ` · host (offloaded optimizer) ${formatBytes(chosen.host_per_gpu)}` : '';
    this.message.classList.remove('calc-error');
    this.message.textContent = `${STAGE_NAMES[selected]}, Ψ = ${formatCount(chosen.psi)}, DP = ${chosen.dp}: `
      + `${formatBytes(chosen.total)} per GPU (${chosen.formula})${host}. `
      + (showCapacity ? fits
        : `Capacity lines (${chosen.capacities.map((c) => formatBytes(c.bytes)).join(', ')}) are far off this scale.`);
  }
}

for (const root of document.querySelectorAll('.memory-calculator')) {
  if (!root.dataset.mounted) {
    root.dataset.mounted = '1';
    new Calculator(root);
  }
}
