/**
 * "Time on: this machine | H100s | …": a control in a live player's header that shows the same
 * run re-timed on a modelled GPU cluster (GET /api/estimate/replay, the `projected` view) in place
 * of its measured pictures, and back. Once modelled, a cluster size (the run's own, or more replicas
 * of it up to 16,384 GPUs: "1,024 × H100") and a model preset to scale the run to. The run, its steps
 * and its prediction question are not touched: the projection depends on the run's parameters only,
 * and is drawn into an SVG of its own, for the pane it gets. "this machine" (the default) is the
 * measured CPU run; any other choice is labelled as modelled. A static export has no estimator: the
 * control is not offered there.
 */
import { staticSite } from './source.js';
import { counted, value as count } from './format.js'; // 1,024
import { GPU_NAMES, MODEL_NAMES } from '../presets.js';
import { clusterSizes, fetchProjection, render } from './views/projected.js';

// The scenarios GET /api/estimate/replay maps onto a cluster (app.estimate_math.replay).
export const REPLAYED = ['basics', 'pipeline', 'ddp', 'zero', 'hsdp', 'tensor_parallel', 'parallel_3d', 'ring_attention', 'ulysses', 'expert_parallel', 'diloco', 'failures'];
const MEASURED = 'measured on this machine';

/**
 * Where a run was measured, as its badge says it: a live run on this machine; a recorded one (serve --runs) where
 * its run file says it ran: "measured on 1 × NVIDIA H200 (nccl), 2026-11-28", "measured on Intel Xeon (2 ranks,
 * gloo), …"; a run file recorded before files said where: "where it was recorded". The title has the rest.
 */
export function measuredOn(meta) {
  if (!meta?.source || meta.source === 'live') {
    // Fewer cores than ranks: the ranks took turns, and their wall times (the timeline) include the turns.
    if (meta?.cores && meta.world_size > meta.cores) {
      return {
        // short: the badge shares the controls row, on a phone too
        text: `measured: ${meta.world_size} ranks on ${counted(meta.cores, 'core')}`,
        title: 'Measured on this machine, whose ranks took turns on fewer cores than ranks: a rank also waits for a '
          + 'core, so wall times show the machine\'s crowding as well as the algorithm',
      };
    }
    return { text: MEASURED, title: '' };
  }
  const where = meta.provenance;
  if (!where) return { text: 'measured where it was recorded', title: 'this run file does not say where it ran' };
  const devices = Object.entries(where.devices);
  const what = where.device_type === 'cuda'
    ? `${devices.map(([name, n]) => `${count(n)} × ${name}`).join(' + ')} (${where.backend})`
    : `${devices.map(([name]) => name).join(' + ')} (${counted(meta.world_size, 'rank')}, ${where.backend})`;
  const hosts = where.hosts.length > 1 ? ` on ${count(where.hosts.length)} hosts` : '';
  const versions = [`torch ${where.torch}`, where.cuda && `CUDA ${where.cuda}`, where.nccl && `NCCL ${where.nccl}`];
  return {
    text: `measured on ${what}${hosts}, ${where.date.slice(0, 10)}`,
    title: `recorded on ${where.hosts.join(', ')} at ${where.date}, ${versions.filter(Boolean).join(', ')}`,
  };
}
const controls = new Set(); // every control, so that the players of one slide (side by side) are timed alike

function select(name, options, title) {
  const el = Object.assign(document.createElement('select'), { name, title });
  for (const [value, text] of options) el.append(Object.assign(document.createElement('option'), { value, textContent: text }));
  // Keys typed into the control are for it, not for the deck's navigation.
  el.addEventListener('keydown', (event) => event.stopPropagation());
  return el;
}

function labelled(className, text, control) {
  const label = Object.assign(document.createElement('label'), { className: `sim-control ${className}` });
  if (text) label.append(Object.assign(document.createElement('span'), { textContent: text }));
  label.append(control);
  return label;
}

// The preset a scenario is first scaled to: a mixture of experts for the expert run; a model that fits its
// layout for the runs without tensor parallelism (HSDP's shard groups, DiLoCo's workers); Llama 3 70B otherwise.
const FIRST_MODEL = { expert_parallel: 'mixtral-8x7b', hsdp: 'llama3-8b', diloco: 'llama3-8b', basics: 'llama3-8b' };

class ClusterControl {
  constructor(player) {
    this.player = player;
    this.where = select('time_on', [['machine', 'this machine'], ...Object.entries(GPU_NAMES)],
      'Show this run as measured on this machine, or its ops re-timed on a modelled GPU cluster');
    // The cluster's size: '' is the run's own (its ranks as GPUs or nodes), the others more replicas of it.
    this.size = select('cluster_gpus', [['', 'its own size']],
      'How many GPUs the modelled cluster has: the run is scaled by data parallelism, each replica keeping its batch');
    this.model = select('cluster_model', Object.entries(MODEL_NAMES), 'The model the run is scaled to on the modelled cluster');
    this.model.value = FIRST_MODEL[player.scenario] ?? 'llama3-70b';
    this.badge = Object.assign(document.createElement('span'), { className: 'sim-clock', textContent: MEASURED });
    this.sizeLabel = labelled('sim-cluster-size', '', this.size);
    this.modelLabel = labelled('sim-cluster-model', 'as', this.model);
    this.sizeLabel.hidden = true;
    this.modelLabel.hidden = true;
    this.element = Object.assign(document.createElement('div'), { className: 'sim-cluster' });
    this.element.append(labelled('sim-cluster-where', 'time on', this.where), this.sizeLabel, this.modelLabel, this.badge);
    player.element.querySelector('.sim-header-right')?.prepend(this.element);
    player.element.addEventListener('sim-meta', () => this.nameMachine()); // the run's meta arrived
    this.nameMachine();

    this.svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    this.svg.setAttribute('viewBox', '0 0 960 520');
    this.svg.setAttribute('preserveAspectRatio', 'xMidYMid meet');
    this.svg.setAttribute('class', 'sim-view sim-view-projected sim-cluster-view');
    this.svg.setAttribute('role', 'img');
    this.svg.setAttribute('aria-label', 'this run modelled on a GPU cluster');
    this.drawn = null;
    this.own = null; // { key: the run's parameters, gpus: its own size on the cluster }
    this.wanted = null; // a size chosen beside it (share) before this run's sizes were known

    this.where.addEventListener('change', () => { this.update(); this.share(); });
    this.size.addEventListener('change', () => { this.draw(); this.share(); });
    this.model.addEventListener('change', () => { this.draw(); this.share(); });
    controls.add(this);
    // A re-run with new parameters is a new projection (and perhaps a new own size).
    new MutationObserver(() => { if (this.modelled) this.update(); })
      .observe(player.element, { attributes: true, attributeFilter: ['data-status'] });
    // Drawn for the pane it gets: again when the pane changes size (the slide laid out, the window resized).
    new ResizeObserver(() => { if (this.modelled && this.svg.isConnected) this.draw(); }).observe(this.svg);
  }

  get modelled() { return this.where.value !== 'machine'; }

  /** A recorded run is timed where it ran, not on this machine: the option and the badge say so. */
  nameMachine() {
    this.measured = measuredOn(this.player.meta);
    const live = !this.player.meta?.source || this.player.meta.source === 'live';
    this.where.options[0].textContent = live ? 'this machine' : 'where it ran';
    this.where.title = `Show this run as measured ${live ? 'on this machine' : 'where it was recorded'}, or its ops re-timed on a modelled GPU cluster`;
    if (!this.modelled) {
      this.badge.textContent = this.measured.text;
      this.badge.title = this.measured.title;
    }
  }

  params() {
    return this.player.meta?.params ?? this.player.params;
  }

  gpuName() {
    return GPU_NAMES[this.where.value] ?? this.where.value;
  }

  /** The sizes offered: the run's own (from the estimator's first answer) and larger multiples of it. */
  offerSizes() {
    const params = this.params();
    const key = JSON.stringify(params);
    fetchProjection(this.player.scenario, params, { model: this.model.value, gpu: this.where.value }).then((est) => {
      if (JSON.stringify(this.params()) !== key) return; // a newer run asks for itself
      if (this.own?.key !== key || this.wanted != null) {
        const chosen = Number(this.wanted ?? this.size.value) || null;
        this.wanted = null;
        const sizes = clusterSizes(est.gpus);
        this.own = { key, gpus: est.gpus };
        this.size.replaceChildren(...sizes.map((n) => Object.assign(document.createElement('option'),
          { value: n === est.gpus ? '' : String(n) })));
        // The chosen size stays where this run can have it too; else the run's own.
        this.size.value = chosen && sizes.includes(chosen) && chosen !== est.gpus ? String(chosen) : '';
      }
      this.draw();
      this.nameSizes();
      this.sizeLabel.hidden = !this.modelled;
    }, () => {}); // a run the estimator cannot map offers no sizes; the view says why
  }

  /** The other players of this slide (two schedules side by side) follow a choice made in this one. */
  share() {
    for (const other of controls) {
      if (other === this || !other.player.slide || other.player.slide !== this.player.slide) continue;
      other.where.value = this.where.value;
      other.model.value = this.model.value;
      // Its sizes may not be known yet: it takes this one's when they are (offerSizes).
      if ([...other.size.options].some((o) => o.value === this.size.value)) other.size.value = this.size.value;
      else other.wanted = this.size.value;
      other.update();
    }
  }

  /** "32 × H100", "1,024 × H100": the options name the GPUs of the chosen type. */
  nameSizes() {
    for (const option of this.size.options) {
      const n = option.value ? Number(option.value) : this.own?.gpus;
      if (n) option.textContent = `${count(n)} × ${this.gpuName()}`;
    }
  }

  update() {
    const views = this.player.viewsEl;
    const modelled = this.modelled;
    this.modelLabel.hidden = !modelled;
    this.sizeLabel.hidden = !modelled || !this.own;
    this.player.element.classList.toggle('sim-modelled', modelled);
    views.classList.toggle('sim-views-modelled', modelled);
    this.badge.textContent = modelled ? 'modelled' : this.measured.text;
    this.badge.title = modelled ? '' : this.measured.title;
    this.badge.classList.toggle('sim-clock-modelled', modelled);
    if (modelled) {
      if (!this.svg.isConnected) views.append(this.svg);
      this.nameSizes();
      this.offerSizes();
      this.draw();
    } else {
      this.svg.remove();
      this.drawn = null;
      // The measured views were drawn at their fallback size while hidden: again, at theirs.
      if (this.player.frames.length) this.player.show(this.player.index, { duration: 0 });
    }
  }

  draw() {
    if (!this.modelled || !this.svg.isConnected) return;
    const gpus = Number(this.size.value) || undefined;
    const cluster = { model: this.model.value, gpu: this.where.value, ...(gpus ? { gpus } : {}) };
    const params = this.params();
    // A size chosen for an earlier run, or beside this one, waits for this run's sizes (offerSizes draws then).
    if (this.wanted != null || (gpus && this.own?.key !== JSON.stringify(params))) return;
    const size = { width: Math.round(this.svg.clientWidth) || 960, height: Math.round(this.svg.clientHeight) || 520 };
    const key = JSON.stringify([cluster, params, size]);
    if (key === this.drawn) return;
    this.drawn = key;
    this.svg.setAttribute('viewBox', `0 0 ${size.width} ${size.height}`);
    // A layer of its own, as the player's views have (what measures the views looks for it).
    this.svg.querySelector(':scope > g.frame-layer')?.remove();
    const layer = window.d3.select(this.svg).append('g').attr('class', 'frame-layer');
    render(layer, { meta: { scenario: this.player.scenario, params }, cluster, size });
  }
}

/** Give `player` the control when the estimator can replay its run and it does not show the projection already. */
export function attachCluster(player) {
  if (staticSite || !REPLAYED.includes(player.scenario) || player.viewNames.includes('projected')) return null;
  return new ClusterControl(player);
}
