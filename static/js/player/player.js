/**
 * A live simulation on a slide: streams a real run's frames, buffers them, and shows one
 * frame per step of the slide. → and ← (through the deck's steps controller) move between
 * frames; while the run is still streaming, → at the last frame waits for the next one.
 */
import { registerStepper, stepsChanged } from '../deck/steps.js';
import { buildControls } from './controls.js';
import { renderSummary } from './summary.js';
import { describeScenario, recordedChoices, streamRecordedRun, streamRun, whyRefused } from './source.js';

// Every view draws in the same 960 × 520 box, so two side by side line up.
const VIEW_BOX = { width: 960, height: 520 };
const viewModules = new Map();

function loadView(name) {
  if (!viewModules.has(name)) viewModules.set(name, import(`./views/${name}.js`));
  return viewModules.get(name);
}

function parseJson(text, fallback) {
  try { return JSON.parse(text); } catch { return fallback; }
}

export class Player {
  constructor(element, { source = streamRun } = {}) {
    this.element = element;
    this.slide = element.closest('section');
    this.scenario = element.dataset.scenario;
    this.params = parseJson(element.dataset.params, {});
    this.viewNames = parseJson(element.dataset.views, []);
    this.controlNames = parseJson(element.dataset.controls, []);
    this.source = source;
    if (element.dataset.run) { // a recorded run (serve --runs): replayed as recorded, nothing to change
      this.source = (scenario, params, handlers) => streamRecordedRun(element.dataset.run, handlers);
      this.controlNames = [];
    }
    this.reset();
    this.build();
    const player = this;
    this.stepper = {
      get count() { return Math.max(1, player.frames.length); },
      get index() { return player.index; },
      get pending() { return player.status === 'idle' || player.status === 'streaming'; },
      go(k) { player.show(k); },
    };
    if (this.slide) registerStepper(this.slide, this.stepper);
  }

  reset() {
    this.meta = null;
    this.frames = [];
    this.summary = null;
    this.index = 0;
    this.status = 'idle';
    this.error = null;
  }

  build() {
    const el = this.element;
    el.classList.add('sim');
    el.setAttribute('role', 'group');
    el.setAttribute('aria-roledescription', 'live simulation');
    this.controlsEl = Object.assign(document.createElement('form'), { className: 'sim-controls' });
    this.controlsEl.addEventListener('submit', (event) => event.preventDefault());
    this.statusEl = Object.assign(document.createElement('p'), { className: 'sim-status' });
    this.statusEl.setAttribute('aria-live', 'polite');
    this.viewsEl = Object.assign(document.createElement('div'), { className: 'sim-views' });
    this.captionEl = Object.assign(document.createElement('p'), { className: 'sim-caption' });
    this.summaryEl = Object.assign(document.createElement('div'), { className: 'sim-summary' });
    const header = Object.assign(document.createElement('div'), { className: 'sim-header' });
    header.append(this.controlsEl, this.statusEl);
    el.replaceChildren(header, this.viewsEl, this.captionEl, this.summaryEl);
    this.svgs = new Map();
  }

  /** Start streaming (once); the deck calls this when the slide comes near. */
  async start() {
    if (this.started) return;
    this.started = true;
    if (this.controlNames.length) {
      try {
        const info = await describeScenario(this.scenario);
        this.params = { ...info.defaults, ...this.params };
        buildControls(this.controlsEl, info.params_schema, this.controlNames, this.params,
          (name, value) => this.rerun({ ...this.params, [name]: value }),
          { choices: (name) => recordedChoices(this.scenario, this.params, name) });
      } catch (err) {
        this.fail(`unknown scenario ${this.scenario}`);
        return;
      }
    }
    this.run();
  }

  rerun(params) {
    this.params = params;
    this.run();
  }

  run() {
    this.connection?.close();
    this.reset();
    this.status = 'streaming';
    this.updateStatus();
    this.notify();
    const runParams = this.params;
    this.connection = this.source(this.scenario, runParams, {
      meta: (meta) => { this.meta = meta; this.ensureViews(meta.views); this.updateStatus(); },
      frame: (frame) => {
        if (frame.index !== this.frames.length) return; // a resumed stream repeats nothing we keep
        this.frames.push(frame);
        if (this.frames.length === 1) this.show(0);
        this.updateStatus();
        this.notify();
      },
      summary: (summary) => { this.summary = summary; },
      done: () => {
        this.status = 'done';
        renderSummary(this.summaryEl, this.summary, this.meta);
        this.updateStatus();
        this.notify();
      },
      error: async (message) => {
        this.fail(message ?? await whyRefused(this.scenario, runParams));
      },
      // A static export without this variant recorded: a plain message, not a failure.
      unavailable: (message) => this.unavailable(message),
    });
  }

  fail(message) {
    this.status = 'error';
    this.error = message;
    this.element.classList.add('sim-failed');
    this.updateStatus();
    this.notify();
  }

  unavailable(message) {
    this.status = 'unavailable';
    this.error = message;
    for (const svg of this.svgs.values()) svg.replaceChildren();
    this.captionEl.textContent = '';
    this.summaryEl.replaceChildren();
    this.updateStatus();
    this.notify();
  }

  notify() {
    if (this.slide) stepsChanged(this.slide);
  }

  ensureViews(names) {
    const wanted = this.viewNames.length ? this.viewNames : names;
    for (const name of wanted) {
      if (this.svgs.has(name)) continue;
      const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
      svg.setAttribute('viewBox', `0 0 ${VIEW_BOX.width} ${VIEW_BOX.height}`);
      svg.setAttribute('class', `sim-view sim-view-${name}`);
      svg.setAttribute('role', 'img');
      svg.setAttribute('aria-label', `${name} view`);
      this.viewsEl.append(svg);
      this.svgs.set(name, svg);
    }
    this.viewsEl.dataset.count = String(this.svgs.size);
  }

  /** Show frame k in every view. */
  async show(k) {
    if (!this.frames.length) return;
    this.index = Math.max(0, Math.min(k, this.frames.length - 1));
    const frame = this.frames[this.index];
    this.captionEl.textContent = frame.caption;
    this.element.dataset.frame = String(this.index);
    this.element.dataset.phase = frame.phase;
    this.updateStatus();
    const scene = { meta: this.meta, frames: this.frames, index: this.index, frame, summary: this.summary };
    for (const [name, svg] of this.svgs) {
      try {
        const view = await loadView(name);
        if (this.index === scene.index) view.render(window.d3.select(svg), scene);
      } catch (err) {
        console.warn(`distdeck: view ${name} failed`, err); // eslint-disable-line no-console
      }
    }
  }

  updateStatus() {
    const total = this.frames.length;
    let text;
    if (this.status === 'error') text = `The run failed: ${this.error}`;
    else if (this.status === 'unavailable') text = this.error.charAt(0).toUpperCase() + this.error.slice(1);
    else if (!total) text = this.status === 'streaming' ? 'Starting the ranks…' : '';
    else text = `Frame ${this.index + 1}/${total}${this.status === 'streaming' ? ' (streaming…)' : ''}`;
    this.statusEl.textContent = text;
    this.element.dataset.status = this.status;
  }
}
