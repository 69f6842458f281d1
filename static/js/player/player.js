/**
 * A live simulation on a slide: streams a real run's frames, buffers them, and shows them step
 * by step. A step is one frame, or, when a run has more frames than a talk has presses, a group
 * of them (a ring phase, a unit's gather-use-free, a few pipeline slots) whose frames play one
 * after another when the step is entered; the "every frame" toggle (and the widget page) go
 * frame by frame. → and ← (through the deck's steps controller) move between steps; the steps
 * are known once the run is complete, so → waits at the first frame while it still streams
 * (the widget page, frame by frame, steps through frames as they arrive).
 *
 * Each view is drawn for the pane it gets (its viewBox is the pane's size in slide pixels, so a
 * font size in a view is a font size on the slide) and animated between frames by motion.js.
 */
import { registerStepper, stepsChanged } from '../deck/steps.js';
import { buildControls } from './controls.js';
import { renderSummary } from './summary.js';
import { finish, motionAllowed, swap } from './motion.js';
import { declutter } from './views/layout.js';
import { describeScenario, recordedChoices, streamRecordedRun, streamRun, whyRefused } from './source.js';

// Used when a pane has no size yet (its slide is not laid out): redrawn once it has one.
const FALLBACK_BOX = { width: 960, height: 520 };
// A live slide tells its story in at most this many presses; runs with more frames are grouped.
export const MAX_STEPS = 20;
// A run of a few long phases (the pipeline's slots) is cut into about this many steps.
const SPLIT_TARGET = 16;
const FEW_PHASES = 6;
// A step's frames play within about this long, each frame's transition 150–450 ms.
const STEP_PLAY_MS = 2400;
const FRAME_MS = 450;
// Phases that continue the step of the phase before them: a unit's reduce-scatter and free; DiLoCo's
// pseudo-gradient, outer all-reduce and outer step. A unit's all-gather is a step of its own, so that a
// press rests on the gathered parameters (ZeRO-3's "gather, use, free"), not only on their free.
const JOINS = {
  reduce_scatter: new Set(['free']),
  pseudo_gradient: new Set(['outer_sync', 'outer_step']),
  outer_sync: new Set(['outer_step']),
};
const viewModules = new Map();

function loadView(name) {
  if (!viewModules.has(name)) viewModules.set(name, import(`./views/${name}.js`));
  return viewModules.get(name);
}

/**
 * Steps of a finished run, as [first frame, last frame] pairs: a frame each when there are at
 * most MAX_STEPS; else runs of one phase (with the phases that join them), long runs cut into
 * pieces, and, if that is still too many, neighbouring groups merged evenly.
 */
export function groupFrames(frames, maxSteps = MAX_STEPS) {
  const n = frames.length;
  if (n <= maxSteps) return frames.map((_, i) => [i, i]);
  let groups = [];
  for (let i = 0; i < n; i += 1) {
    const last = groups[groups.length - 1];
    const prev = frames[i - 1];
    const joins = prev && (frames[i].phase === prev.phase || JOINS[prev.phase]?.has(frames[i].phase));
    if (last && joins) last[1] = i;
    else groups.push([i, i]);
  }
  if (groups.length < FEW_PHASES) {
    // Give the longest groups more steps until the budget is spent.
    const pieces = groups.map(() => 1);
    const size = (g, k) => (groups[g][1] - groups[g][0] + 1) / pieces[g];
    for (let total = groups.length; total < SPLIT_TARGET; total += 1) {
      let best = 0;
      for (let g = 1; g < groups.length; g += 1) if (size(g) > size(best)) best = g;
      if (size(best) <= 1) break;
      pieces[best] += 1;
    }
    groups = groups.flatMap(([a, b], g) => {
      const len = b - a + 1;
      return Array.from({ length: pieces[g] }, (_, k) => [
        a + Math.round((k * len) / pieces[g]), a + Math.round(((k + 1) * len) / pieces[g]) - 1]);
    });
  }
  if (groups.length > maxSteps) {
    const per = Math.ceil(groups.length / maxSteps);
    const merged = [];
    for (let g = 0; g < groups.length; g += per) merged.push([groups[g][0], groups[Math.min(g + per, groups.length) - 1][1]]);
    groups = merged;
  }
  return groups;
}

/** A server's refusal in plain words: "dp·pp·tp = 16 must be at most 8", "world size must be at most 8". */
export function plainRefusal(message) {
  return String(message ?? 'the run could not start')
    .split('; ')
    .map((part) => part
      .replace(/^(query|body|params)\s*:\s*/i, '')
      .replace(/Value error,\s*/i, '')
      .replace(/^(\w+): Input should be less than or equal to (.+)$/, '$1 must be at most $2')
      .replace(/^(\w+): Input should be greater than or equal to (.+)$/, '$1 must be at least $2')
      .replace(/^(\w+): Input should be less than (.+)$/, '$1 must be less than $2')
      .replace(/^(\w+): Input should be greater than (.+)$/, '$1 must be more than $2')
      .replace(/^(\w+)(?=:| must)/, (name) => name.replace(/_/g, ' ')))
    .join('; ');
}

// The players of each slide: pp-side-by-side has two, and → steps both together.
const playersOfSlide = new Map();

function joinSlide(player) {
  const slide = player.slide;
  let list = playersOfSlide.get(slide);
  if (list) {
    list.push(player);
  } else {
    list = [player]; // before registering: registering may already ask the stepper where it is
    playersOfSlide.set(slide, list);
    registerStepper(slide, {
      get count() { return Math.max(1, ...list.map((p) => p.stepCount())); },
      get index() { return Math.max(0, ...list.map((p) => p.stepIndex)); },
      get pending() { return list.some((p) => p.pendingSteps()); },
      go(k) { for (const p of list) p.goStep(k); },
    });
  }
}

function setText(element, text) {
  const value = text ?? '';
  if (element.textContent !== value) element.textContent = value;
}

function setData(element, name, value) {
  if (element.dataset[name] !== String(value)) element.dataset[name] = value;
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
    // The modelled cluster a projected view times the run on ({ model, gpu, gpus }), when the slide names one.
    this.cluster = parseJson(element.dataset.cluster ?? 'null', null) ?? undefined;
    this.source = source;
    // The run's first frame, put in the page by the server (from its run cache) or by the export (from
    // the recorded run): drawn at once, while the stream starts.
    this.firstFrame = parseJson(element.querySelector(':scope > script.sim-first-frame')?.textContent ?? 'null', null);
    if (element.dataset.run) { // a recorded run (serve --runs): replayed as recorded, nothing to change
      this.source = (scenario, params, handlers) => streamRecordedRun(element.dataset.run, handlers);
      this.controlNames = [];
    }
    // The widget page goes frame by frame: it is where the whole run is studied.
    this.everyFrame = Boolean(this.slide?.classList.contains('widget-slide'));
    this.reset();
    this.build();
    const player = this;
    this.stepper = {
      get count() { return player.stepCount(); },
      get index() { return player.stepIndex; },
      get pending() { return player.pendingSteps(); },
      go(k) { player.goStep(k); },
    };
    if (this.slide) joinSlide(this);
  }

  stepCount() { return Math.max(1, this.steps.length); }

  pendingSteps() { return this.status === 'idle' || this.status === 'streaming'; }

  reset() {
    this.meta = null;
    this.frames = [];
    this.summary = null;
    this.index = 0;
    this.steps = [];
    this.stepIndex = 0;
    this.status = 'idle';
    this.error = null;
  }

  /** Steps from the frames: while streaming only the first (or, frame by frame, every one so far). */
  regroup() {
    const shown = this.steps[this.stepIndex] ? this.index : 0;
    if (this.everyFrame) this.steps = this.frames.map((_, i) => [i, i]);
    else if (this.status === 'done') this.steps = groupFrames(this.frames, this.stepBudget());
    else this.steps = this.frames.length ? [[0, 0]] : [];
    const at = this.steps.findIndex(([a, b]) => shown >= a && shown <= b);
    this.stepIndex = Math.max(0, at);
    this.element.dataset.simSteps = String(this.steps.length);
    const onSlide = !this.slide?.classList.contains('widget-slide');
    this.framesToggle.hidden = !(onSlide && this.status === 'done' && groupFrames(this.frames, this.stepBudget()).length < this.frames.length);
  }

  /** Presses the run may take: MAX_STEPS, less one when a "predict, then run" question comes first
   *  (the question is a press of its own, and the slide's story fits MAX_STEPS presses in all). */
  stepBudget() {
    return MAX_STEPS - (this.slide?.querySelector('.predict') ? 1 : 0);
  }

  /** Show step k: from the step before it, its frames play; from anywhere else, its end at once. */
  goStep(k) {
    if (!this.steps.length) return;
    const target = Math.max(0, Math.min(k, this.steps.length - 1));
    const from = this.stepIndex;
    this.stopPlaying();
    this.stepIndex = target;
    this.element.dataset.simStep = String(target);
    const [a, b] = this.steps[target];
    const settled = this.steps[from] && this.index === this.steps[from][1];
    if (!(motionAllowed() && target === from + 1 && settled)) {
      this.show(b, { duration: 0 });
      return;
    }
    const count = b - a + 1;
    const each = count === 1 ? FRAME_MS : Math.max(150, Math.min(FRAME_MS, STEP_PLAY_MS / count));
    let i = a;
    const next = () => {
      this.show(i, { duration: each });
      if (i < b) {
        i += 1;
        this.playing = { timer: window.setTimeout(next, each), end: b };
      } else {
        this.playing = null;
      }
    };
    next();
  }

  /**
   * The frame on screen drawn again in `names` (every view by default) for what changed around it, not for
   * a key: a view's module loaded, its pane resized, the run complete. One view a task (each is a long draw
   * on a slow phone; together, or with the stream's last frames, they made one long task), once the pane
   * has its size (laidOut), and only a view whose picture would change: one already drawn for this frame,
   * run, summary and pane is left as it is. drawn() waits for it (print copies a page only after). A frame
   * shown meanwhile draws every view, which empties the queue.
   */
  refresh(names = this.views.keys()) {
    for (const name of names) if (this.views.has(name)) this.stale.add(name);
    if (this.refreshing || !this.stale.size) return;
    let done;
    this.refreshing = new Promise((resolve) => { done = resolve; });
    this.drawing = Promise.all([this.drawing, this.refreshing]).catch(() => {});
    const step = () => {
      const [name] = this.stale;
      if (name === undefined || this.playing || !this.frames.length) {
        this.stale.clear();
        this.refreshing = null;
        done();
        return;
      }
      this.stale.delete(name);
      const svg = this.svgs.get(name);
      if (this.drawnFor.get(name) !== this.drawKey(svg)) this.show(this.index, { duration: 0, only: name });
      window.setTimeout(step, 0);
    };
    this.laidOut.then(() => window.setTimeout(step, 0));
  }

  /** What a view's picture depends on besides its module: the frame, how much of the run (and its summary) there is, the pane. */
  drawKey(svg, viewBox = this.viewBoxOf(svg)) {
    return `${this.index}/${this.frames.length}/${this.summary ? 1 : 0}/${viewBox}`;
  }

  /** A key during a step's playback: its last frame at once. */
  stopPlaying() {
    for (const svg of this.svgs.values()) finish(svg);
    if (!this.playing) return;
    window.clearTimeout(this.playing.timer);
    const { end } = this.playing;
    this.playing = null;
    this.show(end, { duration: 0 });
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
    // The caption's room is the run's tallest caption, kept by an invisible copy of each caption in
    // the same grid cell: a frame whose caption wraps to another line count does not resize the views
    // (a resized pane is redrawn at once, so the frame change would jump instead of animating).
    this.captionSizer = Object.assign(document.createElement('div'), { className: 'sim-caption-sizer' });
    this.captionSizer.setAttribute('aria-hidden', 'true');
    this.reserved = new Set(); // the captions the sizer holds
    const captionBox = Object.assign(document.createElement('div'), { className: 'sim-caption-box' });
    captionBox.append(this.captionEl, this.captionSizer);
    this.summaryEl = Object.assign(document.createElement('div'), { className: 'sim-summary' });
    // Grouped steps by default; every frame on request (the steps then are the frames).
    this.framesToggle = Object.assign(document.createElement('label'), { className: 'sim-control sim-frames-toggle' });
    this.toggleInput = Object.assign(document.createElement('input'), { type: 'checkbox', name: 'every_frame' });
    this.toggleInput.addEventListener('keydown', (event) => event.stopPropagation());
    this.toggleInput.addEventListener('change', () => {
      this.everyFrame = this.toggleInput.checked;
      this.regroup();
      this.show(this.steps[this.stepIndex]?.[1] ?? 0);
      this.notify();
    });
    this.framesToggle.append(this.toggleInput, Object.assign(document.createElement('span'), { textContent: 'every frame' }));
    this.framesToggle.hidden = true;
    const header = Object.assign(document.createElement('div'), { className: 'sim-header' });
    const right = Object.assign(document.createElement('div'), { className: 'sim-header-right' });
    right.append(this.framesToggle, this.statusEl);
    header.append(this.controlsEl, right);
    el.replaceChildren(header, this.viewsEl, captionBox, this.summaryEl);
    this.svgs = new Map();
    this.views = new Map();
    this.loading = []; // the views' modules, loading
    this.drawing = Promise.resolve(); // the frame on screen, drawn
    this.stale = new Set(); // views to draw again (refresh)
    this.drawnFor = new Map(); // view -> drawKey of what it shows
    // The controls row, once built, takes its room from the views: until then (start) a view that loads waits,
    // rather than be drawn for a pane about to shrink, and drawn again.
    this.laidOut = new Promise((resolve) => { this.layoutDone = resolve; });
    // A pane that changes size (the slide laid out, the window resized) is drawn again for it.
    this.resizer = new ResizeObserver(() => { if (this.frames.length) this.refresh(); });
    this.resizer.observe(this.viewsEl);
  }

  viewBoxOf(svg) {
    const w = Math.round(svg.clientWidth) || FALLBACK_BOX.width;
    const h = Math.round(svg.clientHeight) || FALLBACK_BOX.height;
    return `0 0 ${w} ${h}`;
  }

  /** Start streaming (once); the deck calls this when the slide comes near. */
  async start() {
    if (this.started) return;
    this.started = true;
    this.showFirstFrame(); // before the controls ask the server anything
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
      } finally {
        this.layoutDone();
      }
    }
    this.layoutDone();
    this.run();
  }

  rerun(params) {
    this.params = params;
    this.run();
  }

  run() {
    this.connection?.close();
    window.clearTimeout(this.arrival);
    this.arrival = null;
    this.stopPlaying();
    const runParams = this.params;
    const early = this.firstFrameFor(runParams);
    this.firstFrame = null;
    // The page's first frame, of these params, is on screen already (showFirstFrame): kept, not drawn again.
    const keep = early && this.frames.length === 1 && this.frames[0] === early.frame;
    if (!keep) {
      this.reset();
      this.clear();
      delete this.element.dataset.firstFrame;
    }
    this.element.classList.remove('sim-failed');
    this.status = 'streaming';
    this.updateStatus();
    this.notify();
    const handlers = {
      meta: (meta) => { this.takeMeta(meta); this.updateStatus(); },
      frame: (frame) => {
        if (frame.index !== this.frames.length) return; // a resumed stream repeats nothing we keep
        this.frames.push(frame);
        this.reserveCaption(frame.caption);
        if (this.frames.length === 1) {
          this.regroup();
          this.show(0, { duration: 0, defer: true });
          this.updateStatus();
          this.notify();
        } else {
          this.arrived(); // the steps, status and deck told once for a burst of frames, not once a frame
        }
      },
      summary: (summary) => { this.summary = summary; },
      done: () => {
        this.settleArrivals();
        this.status = 'done';
        this.regroup();
        renderSummary(this.summaryEl, this.summary, this.meta, this.slide);
        // Views that show the run's figures (the pipeline's bubble) or scale to the whole run draw it now.
        if (!this.playing) this.refresh();
        this.updateStatus();
        this.notify();
      },
      error: async (message) => {
        this.fail(message ?? await whyRefused(this.scenario, runParams));
      },
      // A static export without this variant recorded: a plain message, not a failure.
      unavailable: (message) => this.unavailable(message),
    };
    // The first run shows the page's first frame (the stream then repeats frame 0, which the frame
    // handler skips); a re-run with other params starts blank.
    if (early && !keep) this.seed(early, handlers);
    this.connection = this.source(this.scenario, runParams, handlers);
  }

  /**
   * Frames that arrived: the steps regrouped, the status written and the deck told (which re-runs the
   * top bar, the hash, the announcer and the embed API) once per burst, in a task of its own after
   * the stream's events, rather than once per frame inside them (a stream's frames often come in one
   * network read, dispatched in one task: a long task on a slow phone).
   */
  arrived() {
    if (this.arrival) return;
    this.arrival = window.setTimeout(() => this.settleArrivals(), 0);
  }

  settleArrivals() {
    if (!this.arrival) return;
    window.clearTimeout(this.arrival);
    this.arrival = null;
    if (this.status !== 'streaming') return; // failed or re-run meanwhile: that path said what it had to
    this.regroup();
    this.updateStatus();
    this.notify();
  }

  /** The page's first frame, if it is of a run with these params (every one given matches), else null. */
  firstFrameFor(params) {
    const early = this.firstFrame;
    if (!early?.meta?.params || early.frame?.index !== 0 || early.meta.scenario !== this.scenario) return null;
    const same = Object.entries(params).every(([name, value]) => String(early.meta.params[name]) === String(value));
    return same ? early : null;
  }

  seed(early, handlers) {
    for (const caption of early.captions ?? []) this.reserveCaption(caption);
    handlers.meta(early.meta);
    handlers.frame(early.frame);
    this.element.dataset.firstFrame = 'page'; // drawn from the page, not from the stream
  }

  /** The page's first frame drawn at once, while the controls and the stream start (run() keeps it). */
  showFirstFrame() {
    const early = this.firstFrameFor(this.params);
    if (!early) return;
    this.status = 'streaming';
    this.seed(early, {
      meta: (meta) => this.takeMeta(meta),
      frame: (frame) => { this.frames = [frame]; this.regroup(); this.show(0, { duration: 0, defer: true }); this.updateStatus(); this.notify(); },
    });
  }

  /** The run's meta: its views made, and `sim-meta` told (the "time on" control names where a recorded run ran). */
  takeMeta(meta) {
    this.meta = meta;
    this.ensureViews(meta.views);
    this.element.dispatchEvent(new CustomEvent('sim-meta'));
  }

  /** Room for `caption` under the views, once per distinct caption of the run. */
  reserveCaption(caption) {
    if (!caption || this.reserved.has(caption)) return;
    this.reserved.add(caption);
    this.captionSizer.append(Object.assign(document.createElement('p'), { textContent: caption }));
  }

  /** The old run's pictures, caption and checks go: they belong to other settings. */
  clear() {
    for (const svg of this.svgs.values()) { finish(svg); svg.querySelector(':scope > g.frame-layer')?.remove(); }
    this.captionEl.textContent = '';
    this.captionSizer.replaceChildren();
    this.reserved.clear();
    this.drawnFor.clear();
    this.summaryEl.replaceChildren();
    this.slide?.querySelector('aside.notes .sim-notes')?.remove();
  }

  fail(message) {
    window.clearTimeout(this.arrival);
    this.arrival = null;
    this.stopPlaying();
    this.status = 'error';
    this.error = plainRefusal(message);
    this.frames = [];
    this.steps = [];
    this.stepIndex = 0;
    this.clear();
    this.element.classList.add('sim-failed');
    this.updateStatus();
    this.notify();
  }

  unavailable(message) {
    this.stopPlaying();
    this.status = 'unavailable';
    this.error = message;
    this.clear();
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
      svg.setAttribute('viewBox', `0 0 ${FALLBACK_BOX.width} ${FALLBACK_BOX.height}`);
      svg.setAttribute('preserveAspectRatio', 'xMidYMid meet');
      svg.setAttribute('class', `sim-view sim-view-${name}`);
      svg.setAttribute('role', 'img');
      svg.setAttribute('aria-label', `${name} view`);
      this.viewsEl.append(svg);
      this.svgs.set(name, svg);
      this.loading.push(loadView(name).then((view) => {
        this.views.set(name, view);
        // This view drawn (the others already show the frame): not every view again as each module lands.
        if (this.frames.length) this.refresh([name]);
      }, (err) => console.warn(`distdeck: view ${name} failed to load`, err))); // eslint-disable-line no-console
    }
    this.viewsEl.dataset.count = String(this.svgs.size);
    this.viewsEl.dataset.views = Array.from(this.svgs.keys()).join(' ');
  }

  /**
   * Show frame k in every view, animated from what is on screen over `duration` ms. `defer`: a run's first
   * frame, which no key asked for: its caption and status now, its views drawn by refresh (one a task).
   */
  show(k, { duration = FRAME_MS, only = null, defer = false } = {}) {
    if (!this.frames.length) return;
    if (only && this.index !== Math.max(0, Math.min(k, this.frames.length - 1))) only = null;
    if (!only) this.stale.clear(); // every view drawn (or, deferred, queued below): none left to refresh
    // Every pane measured before anything is written or drawn: a measure after a write lays the page
    // out again at once (a forced layout per view per frame). The caption's room is reserved (captionSizer),
    // so the caption written below does not change a pane's size.
    const boxes = new Map();
    if (!defer) for (const [name, svg] of this.svgs) if (this.views.has(name) && (!only || name === only)) boxes.set(name, this.viewBoxOf(svg));
    this.index = Math.max(0, Math.min(k, this.frames.length - 1));
    const frame = this.frames[this.index];
    // Written only when they change: a text written again, even the same, lays the page out again.
    setText(this.captionEl, frame.caption);
    setData(this.element, 'frame', String(this.index));
    setData(this.element, 'frames', String(this.frames.length));
    setData(this.element, 'phase', frame.phase);
    this.updateStatus();
    // For whoever shows the presenter what is on screen (the speaker window): caption and step.
    document.dispatchEvent(new CustomEvent('distdeck:frame', {
      detail: { slide: this.slide?.id ?? null, caption: frame.caption, frame: this.index, frames: this.frames.length,
        step: this.stepIndex, steps: this.steps.length },
    }));
    if (defer) {
      this.refresh(only ? [only] : undefined);
      return;
    }
    const drawing = [];
    for (const [name, svg] of this.svgs) {
      const view = this.views.get(name);
      if (!view || !boxes.has(name)) continue; // drawn when its module has loaded (or not asked for)
      const viewBox = boxes.get(name);
      const [, , width, height] = viewBox.split(' ').map(Number);
      const resized = svg.getAttribute('viewBox') !== viewBox;
      svg.setAttribute('viewBox', viewBox);
      const scene = {
        meta: this.meta, frames: this.frames, index: this.index, frame, summary: this.summary,
        size: { width, height }, params: this.params, cluster: this.cluster,
      };
      try {
        // A view that fetches what it draws (the projected one) returns a promise of its picture.
        const draw = (root) => { drawing.push(view.render(root, scene)); declutter(root.node()); };
        const layer = swap(svg, draw, { duration: resized ? 0 : duration });
        this.drawnFor.set(name, this.drawKey(svg, viewBox));
        // What a view says about itself (data-*, aria-label) belongs on its SVG.
        for (const attr of Array.from(layer.attributes)) {
          if (attr.name.startsWith('data-') || attr.name === 'aria-label') {
            svg.setAttribute(attr.name, attr.value);
            layer.removeAttribute(attr.name);
          }
        }
      } catch (err) {
        console.warn(`distdeck: view ${name} failed`, err); // eslint-disable-line no-console
      }
    }
    // One view drawn again: the others' drawings (an estimate still being fetched) are still to wait for.
    this.drawing = Promise.all(only ? [this.drawing, ...drawing] : drawing).catch(() => {});
  }

  /**
   * Resolves once every view has drawn the frame on screen: its module loaded, and what a view fetches
   * to draw (the modelled cluster's estimate) answered. Print waits on it before copying a page.
   */
  async drawn() {
    for (;;) {
      const { drawing } = this;
      await Promise.all([...this.loading, drawing]);
      // A view module that loaded meanwhile drew the frame again: wait for that drawing too.
      if (drawing === this.drawing) return;
    }
  }

  updateStatus() {
    const total = this.frames.length;
    let text;
    if (this.status === 'error') text = `These settings cannot run: ${this.error}.`;
    else if (this.status === 'unavailable') text = this.error.charAt(0).toUpperCase() + this.error.slice(1);
    else if (!total) text = this.status === 'streaming' ? 'Starting the ranks…' : '';
    // No frame counter here: the audience has one, the top bar's step; the frame goes to the speaker notes.
    else text = this.status === 'streaming' ? 'Running…' : '';
    setText(this.statusEl, text);
    setData(this.element, 'status', this.status);
  }
}
