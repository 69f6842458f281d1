/**
 * The memory calculator widget: inputs -> GET /api/calculator (REFERENCE.md's formulas, computed
 * by simulations.formulas on the server) -> one stacked bar per ZeRO stage, by role, against the
 * 80 GB (A100/H100) and 141 GB (H200) lines. The selected stage is highlighted.
 *
 * Mounts on every `.memory-calculator` element; `data-params` (JSON) sets the initial inputs.
 * No number here is computed in the browser: the bars are the server's bytes.
 */

const SVG_NS = 'http://www.w3.org/2000/svg';
const ROLES = ['parameters', 'gradients', 'optimizer', 'activations'];
const ROLE_VARS = {
  parameters: 'var(--role-params, #5cc8ff)',
  gradients: 'var(--role-grads, #7ee07e)',
  optimizer: 'var(--role-optimizer, #ffb454)',
  activations: 'var(--role-activations, #c792ea)',
};
const STAGE_NAMES = ['DDP', 'ZeRO-1', 'ZeRO-2', 'ZeRO-3'];

const FIELDS = [
  { name: 'model', label: 'Model', type: 'select', options: ['1B', '7B', '70B', '405B', 'custom'], value: '7B' },
  { name: 'psi', label: 'Ψ', type: 'number', min: 1, custom: true },
  { name: 'hidden', label: 'hidden', type: 'number', min: 64, custom: true },
  { name: 'layers', label: 'layers', type: 'number', min: 1, custom: true },
  { name: 'heads', label: 'heads', type: 'number', min: 1, custom: true },
  { name: 'vocab', label: 'vocab', type: 'number', min: 1, custom: true },
  { name: 'precision', label: 'Precision', type: 'select', options: ['bf16', 'fp32'], value: 'bf16' },
  { name: 'zero_stage', label: 'ZeRO', type: 'select', options: ['0', '1', '2', '3'], value: '3' },
  { name: 'gpus', label: 'GPUs', type: 'number', min: 1, value: 8 },
  { name: 'tp', label: 'TP', type: 'number', min: 1, value: 1 },
  { name: 'pp', label: 'PP', type: 'number', min: 1, value: 1 },
  { name: 'seq_len', label: 'seq', type: 'number', min: 1, value: 4096 },
  { name: 'micro_batch', label: 'micro-batch', type: 'number', min: 1, value: 1 },
  { name: 'activation_checkpointing', label: 'checkpointing', type: 'checkbox', value: false },
  { name: 'cpu_offload', label: 'CPU offload', type: 'checkbox', value: false },
];

function svgEl(tag, attrs = {}, text) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text != null) el.textContent = text;
  return el;
}

function gb(bytes) {
  const v = bytes / 1e9;
  if (v >= 1) return `${v < 10 ? v.toFixed(1) : Math.round(v).toLocaleString('en-US')} GB`;
  if (bytes >= 1e6) return `${(bytes / 1e6).toFixed(1)} MB`;
  if (bytes >= 1e3) return `${(bytes / 1e3).toFixed(2)} kB`;
  return `${Math.round(bytes)} B`;
}

class Calculator {
  constructor(root) {
    this.root = root;
    let initial = {};
    try { initial = JSON.parse(root.dataset.params || '{}'); } catch { initial = {}; }
    this.form = document.createElement('form');
    this.form.className = 'calc-form';
    // Inline layout so the widget needs no stylesheet of its own (colours come from the deck's variables).
    Object.assign(this.form.style, { display: 'flex', flexWrap: 'wrap', gap: '0.3em 1em', fontSize: '0.45em',
                                     alignItems: 'center' });
    this.inputs = {};
    for (const field of FIELDS) {
      const label = document.createElement('label');
      label.className = `calc-field${field.custom ? ' calc-custom' : ''}`;
      label.append(document.createTextNode(`${field.label} `));
      let input;
      if (field.type === 'select') {
        input = document.createElement('select');
        for (const option of field.options) input.append(new Option(option, option));
      } else {
        input = Object.assign(document.createElement('input'), { type: field.type });
        if (field.min != null) input.min = field.min;
        if (field.type === 'number') input.style.width = field.name === 'psi' ? '9em' : '5.5em';
      }
      input.name = field.name;
      const start = initial[field.name] ?? field.value;
      if (field.type === 'checkbox') input.checked = Boolean(start);
      else if (start != null) input.value = String(start);
      input.addEventListener('change', () => this.update());
      // Keys typed into the form are for the form, not for the deck's navigation.
      input.addEventListener('keydown', (event) => event.stopPropagation());
      label.append(input);
      this.form.append(label);
      this.inputs[field.name] = input;
    }
    this.form.addEventListener('submit', (event) => { event.preventDefault(); this.update(); });
    this.svg = svgEl('svg', { viewBox: '0 0 960 300', class: 'calc-chart', role: 'img',
                              'aria-label': 'Bytes per GPU by role for ZeRO stages 0 to 3' });
    this.message = Object.assign(document.createElement('p'), { className: 'calc-message' });
    this.message.style.fontSize = '0.45em';
    this.svg.style.fontSize = '18px';
    this.message.setAttribute('aria-live', 'polite');
    root.replaceChildren(this.form, this.svg, this.message);
    this.update();
  }

  query(stage) {
    const params = new URLSearchParams();
    const custom = this.inputs.model.value === 'custom';
    for (const field of FIELDS) {
      const input = this.inputs[field.name];
      if (field.custom && !custom) continue;
      if (field.type === 'checkbox') params.set(field.name, input.checked ? 'true' : 'false');
      else if (input.value !== '') params.set(field.name, input.value);
    }
    params.set('zero_stage', String(stage));
    return params;
  }

  async update() {
    const custom = this.inputs.model.value === 'custom';
    for (const el of this.form.querySelectorAll('.calc-custom')) el.hidden = !custom;
    const token = (this.token = Symbol('update'));
    try {
      const replies = await Promise.all([0, 1, 2, 3].map(async (stage) => {
        const response = await fetch(`/api/calculator?${this.query(stage)}`);
        const body = await response.json();
        if (!response.ok) {
          const detail = body.detail?.[0];
          const where = detail?.loc?.slice(1).join('.') || 'input';
          throw new Error(`${where}: ${detail?.msg ?? response.statusText}`);
        }
        return body;
      }));
      if (token !== this.token) return; // a newer update is on its way
      this.draw(replies, Number(this.inputs.zero_stage.value));
    } catch (error) {
      if (token !== this.token) return;
      this.message.textContent = error.message;
      this.message.classList.add('calc-error');
    }
  }

  draw(results, selected) {
    const svg = this.svg;
    svg.replaceChildren();
    const left = 120, right = 930, top = 40, rowH = 46, gap = 12;
    const capacities = results[0].capacities;
    const maxTotal = Math.max(...results.map((r) => r.total));
    const showCapacity = maxTotal >= 1e9;
    const axisMax = Math.max(maxTotal, showCapacity ? capacities.at(-1).bytes : 0) * 1.08 || 1;
    const x = (bytes) => left + (bytes / axisMax) * (right - left);

    results.forEach((result, stage) => {
      const y = top + stage * (rowH + gap);
      const row = svgEl('g', { class: `calc-row${stage === selected ? ' calc-selected' : ''}` });
      row.append(svgEl('text', { x: left - 10, y: y + rowH / 2 + 5, 'text-anchor': 'end',
                                 'font-weight': stage === selected ? 'bold' : 'normal', fill: 'currentColor' },
                       STAGE_NAMES[stage]));
      let at = 0;
      for (const role of ROLES) {
        const value = result.per_gpu[role] ?? 0;
        if (value <= 0) continue;
        const rect = svgEl('rect', { x: x(at), y, width: Math.max(x(at + value) - x(at), 0.5), height: rowH,
                                     fill: ROLE_VARS[role], opacity: stage === selected ? 1 : 0.55 });
        rect.append(svgEl('title', {}, `${role}: ${gb(value)}`));
        row.append(rect);
        at += value;
      }
      row.append(svgEl('text', { x: Math.min(x(at) + 6, right - 4), y: y + rowH / 2 + 5,
                                 'text-anchor': x(at) + 6 > right - 80 ? 'end' : 'start', fill: 'currentColor' },
                       gb(result.total)));
      svg.append(row);
    });

    if (showCapacity) {
      for (const capacity of capacities) {
        const cx = x(capacity.bytes);
        svg.append(svgEl('line', { x1: cx, x2: cx, y1: top - 12, y2: top + 4 * (rowH + gap) - gap + 6,
                                   stroke: 'currentColor', 'stroke-dasharray': '5 4', 'stroke-width': 1.5 }));
        svg.append(svgEl('text', { x: cx, y: top - 18, 'text-anchor': 'middle', fill: 'currentColor',
                                   'font-size': 14 }, `${capacity.name} ${gb(capacity.bytes)}`));
      }
    }
    // Legend.
    let lx = left;
    for (const role of ROLES) {
      svg.append(svgEl('rect', { x: lx, y: 280, width: 14, height: 14, fill: ROLE_VARS[role] }));
      svg.append(svgEl('text', { x: lx + 20, y: 292, fill: 'currentColor', 'font-size': 14 }, role));
      lx += 150;
    }

    const chosen = results[selected];
    const fits = chosen.capacities.map((c) => `${c.name}: ${c.fits ? 'fits' : 'does not fit'}`).join(' · ');
    const host = chosen.host_per_gpu > 0 ? ` · host (offloaded optimizer) ${gb(chosen.host_per_gpu)}` : '';
    this.message.classList.remove('calc-error');
    this.message.textContent = `${STAGE_NAMES[selected]}, Ψ = ${chosen.psi.toExponential(3)}, DP = ${chosen.dp}: `
      + `${gb(chosen.total)} per GPU (${chosen.formula})${host}. `
      + (showCapacity ? fits : 'Capacity lines (80 GB, 141 GB) are far off this scale.');
  }
}

for (const root of document.querySelectorAll('.memory-calculator')) {
  if (!root.dataset.mounted) {
    root.dataset.mounted = '1';
    new Calculator(root);
  }
}
