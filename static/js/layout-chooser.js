/**
 * The layout chooser: model, sequence length, GPUs, GPU type, attention kernel, execution and network bandwidth in ->
 * GET /api/estimate/search
 * (simulations.estimate on the server: every TP × PP × CP layout the cluster allows, a mixture of experts'
 * EP degrees, ZeRO-1 or 3 (also hybrid sharded, HSDP), 1F1B or interleaved, each with its fastest
 * micro-batch and virtual stages that fit) -> the best
 * few layouts ranked by step time, with memory per GPU, MFU, exposed communication and bubble.
 *
 * Mounts on every `.layout-chooser` element; `data-params` (JSON) sets the initial inputs. The
 * table the server rendered into the slide stays until the first answer replaces it, so a static
 * export (no server) keeps the default ranking. No number is computed in the browser.
 */

import { buildForm } from './form-fields.js';
import { GPU_NAMES, MODEL_NAMES } from './presets.js';

const FIELDS = [
  { name: 'model', label: 'Model', type: 'select', options: Object.entries(MODEL_NAMES) },
  { name: 'seq_len', label: 'Sequence', type: 'number', min: 128, step: 128 },
  { name: 'gpu', label: 'GPU', type: 'select', options: Object.entries(GPU_NAMES) },
  { name: 'gpus', label: 'GPUs', type: 'number', min: 8, step: 8 },
  { name: 'global_batch', label: 'Batch (sequences)', type: 'number', min: 1 },
  // the software and the network, as the estimator takes them (kernels.py; empty bandwidth: the GPU's DGX node)
  { name: 'attention_kernel', label: 'Attention', type: 'select',
    options: [['auto', 'auto'], ['fa2', 'FlashAttention-2'], ['fa3', 'FlashAttention-3'], ['cudnn', 'cuDNN'],
              ['triton_fa1', 'Triton (2022)'], ['fa1', 'FlashAttention (v1)']] },
  { name: 'execution', label: 'Execution', type: 'select',
    options: [['auto', 'auto'], ['eager', 'eager PyTorch'], ['fused', 'fused (Megatron)'],
              ['compiled', 'compiled / CUDA graphs']] },
  { name: 'precision', label: 'Matmuls', type: 'select', value: 'bf16',
    options: [['bf16', 'bf16'], ['fp8', 'FP8 (TransformerEngine)']] },
  // activation checkpointing: selective keeps all but attention's core; full replays one layer in every n;
  // op (torchtitan's per-op policy) replays every second matmul and the element-wise ops
  { name: 'recompute', label: 'Recompute', type: 'select', value: 'selective',
    options: [['selective', 'selective'], ['full', 'full'], ['op', 'per op (torchtitan)'], ['none', 'none']] },
  { name: 'recompute_every', label: 'Full: 1 layer in', type: 'number', min: 1, step: 1, value: 1 },
  { name: 'network_gbps', label: 'Network / node (Gb/s)', type: 'number', min: 100, step: 100,
    placeholder: 'DGX' },
];

// ZeRO's stage; hybrid sharded (HSDP): ZeRO-3 inside groups of zero_shards DP·CP ranks, replicas across them
function zeroLabel(r) {
  return r.zero_shards ? `3, HSDP ${r.zero_shards}` : String(r.zero_stage);
}

const COLUMNS = [
  ['#', (r, i) => String(i + 1)],
  ['TP × PP × CP × DP', (r) => `${r.tp} × ${r.pp} × ${r.cp} × ${r.dp}`],
  // EP is carved out of the DP·CP ranks (parallel folding), so it is a column of its own, not a factor
  ['EP', (r) => String(r.ep)],
  ['ZeRO', zeroLabel],
  ['schedule', (r) => (r.schedule === 'interleaved_1f1b' ? `interleaved, v ${r.virtual_stages}`
    : r.pp > 1 ? '1F1B' : '—')],
  ['micro-batch', (r) => String(r.micro_batch)],
  ['memory / GPU', (r) => `${(r.memory_per_gpu_bytes.total / 1e9).toFixed(0)} GB`],
  ['step', (r) => `${r.step_time_s.toFixed(2)} s`],
  ['MFU', (r) => `${(100 * r.mfu).toFixed(0)} %`],
  ['exposed comm.', (r) => `${r.exposed_comm_s.toFixed(2)} s`],
  ['bubble', (r) => `${(100 * r.bubble_fraction).toFixed(0)} %`],
];

function layoutKey(r) {
  return [r.tp, r.pp, r.cp, r.ep, r.zero_stage, r.zero_shards ?? 'all', r.schedule, r.virtual_stages,
          r.micro_batch].join('-');
}

class Chooser {
  constructor(root) {
    this.root = root;
    let initial = {};
    try { initial = JSON.parse(root.dataset.params || '{}'); } catch { initial = {}; }
    this.form = root.querySelector('form.chooser-form') || document.createElement('form');
    this.form.className = 'chooser-form';
    this.form.replaceChildren();
    // Inline layout so the widget needs no stylesheet of its own (colours come from the deck's variables).
    Object.assign(this.form.style, { display: 'flex', flexWrap: 'wrap', gap: '0.3em 1.2em', fontSize: '0.56em',
                                     alignItems: 'center', margin: '0 0 0.3em' });
    this.inputs = buildForm(this.form, FIELDS, initial, () => this.update(), { inheritFont: true });
    this.tbody = root.querySelector('tbody');
    this.message = root.querySelector('.chooser-message');
    if (!root.contains(this.form)) root.prepend(this.form);
  }

  query() {
    const params = new URLSearchParams({ tp: '1' });
    for (const [name, input] of Object.entries(this.inputs)) if (input.value !== '') params.set(name, input.value);
    return params;
  }

  async update() {
    const token = (this.token = Symbol('update'));
    this.message.textContent = 'estimating…';
    this.message.classList.remove('chooser-error');
    try {
      const response = await fetch(`/api/estimate/search?${this.query()}`);
      const body = await response.json().catch(() => ({}));
      if (!response.ok) {
        const detail = body.detail?.[0];
        const where = detail?.loc?.slice(1).join('.') || 'input';
        throw new Error(typeof body.detail === 'string' ? body.detail : `${where}: ${detail?.msg ?? response.statusText}`);
      }
      if (token !== this.token) return; // a newer question is on its way
      this.draw(body.layouts);
    } catch (error) {
      if (token !== this.token) return;
      this.message.textContent = error.message;
      this.message.classList.add('chooser-error');
    }
  }

  draw(rows) {
    const byKey = new Map([...this.tbody.children].map((tr) => [tr.dataset.key, tr]));
    const ordered = rows.map((r, i) => {
      const key = layoutKey(r);
      const tr = byKey.get(key) || document.createElement('tr');
      tr.dataset.key = key;
      tr.replaceChildren(...COLUMNS.map(([, cell], c) => {
        const td = document.createElement(c === 0 ? 'th' : 'td');
        if (c === 0) td.scope = 'row';
        td.textContent = cell(r, i);
        return td;
      }));
      return tr;
    });
    this.tbody.replaceChildren(...ordered);
    const gpu = this.inputs.gpu.value;
    this.message.textContent = rows.length
      ? `${rows.length} fastest of the layouts that fit in ${(rows[0].gpu_memory_bytes / 1e9).toFixed(0)} GB per ${GPU_NAMES[gpu] ?? gpu}`
      : 'no layout fits: more GPUs, a shorter sequence or a smaller batch';
  }
}

for (const root of document.querySelectorAll('.layout-chooser')) new Chooser(root);
