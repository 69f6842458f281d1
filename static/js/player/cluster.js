/**
 * "Time on: this machine | N × H100 | …": a control in a live player's header that shows the same
 * run re-timed on a modelled GPU cluster (GET /api/estimate/replay, the `projected` view) in place
 * of its measured pictures, and back. The run, its steps and its prediction question are not
 * touched: the projection depends on the run's parameters only, and is drawn into an SVG of its own.
 * "this machine" (the default) is the measured CPU run; any other choice is labelled as modelled.
 * A static export has no estimator: the control is not offered there.
 */
import { staticSite } from './source.js';
import { fetchProjection, render } from './views/projected.js';

// The scenarios GET /api/estimate/replay maps onto a cluster (app.estimate_math.replay).
export const REPLAYED = ['basics', 'pipeline', 'ddp', 'zero', 'hsdp', 'tensor_parallel', 'parallel_3d', 'ring_attention', 'ulysses', 'expert_parallel', 'diloco'];
const GPUS = [['h100-80gb', 'H100'], ['a100-80gb', 'A100'], ['h200', 'H200'], ['b200', 'B200']];
const MODELS = [['llama3-70b', 'Llama 3 70B'], ['llama3-8b', 'Llama 3 8B'], ['llama3-405b', 'Llama 3 405B'],
  ['gpt3-175b', 'GPT-3 175B']];
const MEASURED = 'measured on this machine';

function select(name, options, title) {
  const el = Object.assign(document.createElement('select'), { name, title });
  for (const [value, text] of options) el.append(Object.assign(document.createElement('option'), { value, textContent: text }));
  // Keys typed into the control are for it, not for the deck's navigation.
  el.addEventListener('keydown', (event) => event.stopPropagation());
  return el;
}

class ClusterControl {
  constructor(player) {
    this.player = player;
    this.where = select('time_on', [['machine', 'this machine'], ...GPUS.map(([v, n]) => [v, `${n} cluster`])],
      'Show this run as measured on this machine, or its ops re-timed on a modelled GPU cluster');
    this.model = select('cluster_model', MODELS, 'The model the run is scaled to on the modelled cluster');
    this.badge = Object.assign(document.createElement('span'), { className: 'sim-clock', textContent: MEASURED });
    const whereLabel = Object.assign(document.createElement('label'), { className: 'sim-control sim-cluster-where' });
    whereLabel.append(Object.assign(document.createElement('span'), { textContent: 'time on' }), this.where);
    this.modelLabel = Object.assign(document.createElement('label'), { className: 'sim-control sim-cluster-model' });
    this.modelLabel.append(Object.assign(document.createElement('span'), { textContent: 'as' }), this.model);
    this.modelLabel.hidden = true;
    this.element = Object.assign(document.createElement('div'), { className: 'sim-cluster' });
    this.element.append(whereLabel, this.modelLabel, this.badge);
    player.element.querySelector('.sim-header-right')?.prepend(this.element);

    this.svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    this.svg.setAttribute('viewBox', '0 0 960 520');
    this.svg.setAttribute('preserveAspectRatio', 'xMidYMid meet');
    this.svg.setAttribute('class', 'sim-view sim-view-projected sim-cluster-view');
    this.svg.setAttribute('role', 'img');
    this.svg.setAttribute('aria-label', 'this run modelled on a GPU cluster');
    this.drawn = null;

    this.where.addEventListener('change', () => this.update());
    this.model.addEventListener('change', () => this.update());
    // The option names say how many GPUs the run becomes, once the estimator has said (it asks on first use).
    const count = () => this.labelCounts();
    this.where.addEventListener('focus', count);
    this.where.addEventListener('pointerdown', count);
    // A re-run with new parameters is a new projection.
    new MutationObserver(() => { if (this.modelled) this.draw(); })
      .observe(player.element, { attributes: true, attributeFilter: ['data-status'] });
  }

  get modelled() { return this.where.value !== 'machine'; }

  params() {
    return this.player.meta?.params ?? this.player.params;
  }

  labelCounts() {
    fetchProjection(this.player.scenario, this.params(), { model: this.model.value }).then((est) => {
      for (const option of this.where.options) {
        const gpu = GPUS.find(([v]) => v === option.value);
        if (gpu) option.textContent = `${est.gpus} × ${gpu[1]}`;
      }
    }, () => {}); // a run the estimator cannot map keeps the plain names; choosing one shows why
  }

  update() {
    const views = this.player.viewsEl;
    const modelled = this.modelled;
    this.modelLabel.hidden = !modelled;
    this.player.element.classList.toggle('sim-modelled', modelled);
    views.classList.toggle('sim-views-modelled', modelled);
    this.badge.textContent = modelled ? 'modelled' : MEASURED;
    this.badge.classList.toggle('sim-clock-modelled', modelled);
    if (modelled) {
      if (!this.svg.isConnected) views.append(this.svg);
      this.draw();
      this.labelCounts();
    } else {
      this.svg.remove();
      // The measured views were drawn at their fallback size while hidden: again, at theirs.
      if (this.player.frames.length) this.player.show(this.player.index, { duration: 0 });
    }
  }

  draw() {
    const cluster = { model: this.model.value, gpu: this.where.value };
    const params = this.params();
    const key = JSON.stringify([cluster, params]);
    if (key === this.drawn) return;
    this.drawn = key;
    render(window.d3.select(this.svg), { meta: { scenario: this.player.scenario, params }, cluster });
  }
}

/** Give `player` the control when the estimator can replay its run and it does not show the projection already. */
export function attachCluster(player) {
  if (staticSite || !REPLAYED.includes(player.scenario) || player.viewNames.includes('projected')) return null;
  return new ClusterControl(player);
}
