/**
 * "Predict, then run": before a live slide's run plays, the audience answers a question about it.
 *
 * Markup (slides/macros.html.j2, `predict`): a `.predict` box on a slide with a `.live-sim`, its
 * question, two to four choice buttons, and in data-predict what to read off the run:
 *   { read: "figures.peak_in_flight.0",   a path into the run's summary
 *     per: "figures.gradient_bytes",      optional: divide by this path first
 *     pick: "nearest" | "argmax" | "argmin" | "compare",
 *     format: "count" | "ratio" | "psi" | "bytes" | "rank" | "percent" | "compare" | "key",
 *     source: "summary" | "projection",   what `read` is read from: the run's summary, or the
 *                                          estimator's replay of that run on a modelled cluster
 *                                          (the projected view's GET /api/estimate/replay)
 *     choices: [{ label, value }, ...] }
 * The correct choice is never written into the slide: when the run's summary arrives it is the
 * choice nearest to the measured value (or the index/key of the largest or smallest entry, "all"
 * when every entry ties; or, for "compare", the sign of read/per − 1).
 *
 * When the answer shows: data-answer-at on the box names the frame at which the run demonstrates
 * it, as a predicate on the run's frames (answerFrame): { phase: "backward_done" }, the first frame
 * of that phase; or { frame: "ranks.0.extra.in_flight", reaches: "figures.peak_in_flight.0" }, the
 * first frame whose value at `frame` reaches the summary's value at `reaches`. Without it, the run's
 * last frame (a projection's answer: its first, the modelled cluster is drawn whole from the start).
 * Before that frame is on screen the box only says what the room voted; stepping back hides it again.
 *
 * Steps: the slide's stepper (registered by the live player) is wrapped so that step 0 is the
 * question, with the run hidden; the next → reveals the run at its first frame. Nothing in the
 * player changes: this module reads the run through its public surface, the stepper (steps.js),
 * the frame on screen (the .live-sim's data-frame) and window.distdeck.players.
 *
 * Voting: on the question, keys A–D pick a choice (a presenter's clicker or keyboard records the
 * room's vote; in the speaker window too, through its preview); the vote shows on the choice and in
 * the speaker notes (speaker.js reads data-picked).
 */
import { registerStepper, stepperOf, stepsChanged } from './steps.js';

const LETTERS = ['A', 'B', 'C', 'D'];
const WRAPPED = Symbol('predict');

/** The value at a dotted path ("figures.peak_in_flight.0") of an object, or undefined. */
export function readPath(object, path) {
  return String(path).split('.').reduce((o, key) => (o == null ? undefined : o[key]), object);
}

/** What the run says: { value, index } with index the correct choice (-1 if none), or null. */
export function answerOf(spec, summary) {
  const raw = summary ? readPath(summary, spec.read) : undefined;
  if (raw === undefined || raw === null) return null;
  const choices = spec.choices;
  if (spec.pick === 'argmax' || spec.pick === 'argmin') {
    const entries = Array.isArray(raw) ? raw.map((v, i) => [i, v]) : Object.entries(raw);
    if (!entries.length) return null;
    const better = (a, b) => (spec.pick === 'argmax' ? b[1] > a[1] : b[1] < a[1]);
    const best = entries.reduce((a, b) => (better(a, b) ? b : a));
    // A tie across every entry (a balanced run) is its own answer: "all".
    const value = entries.every((e) => e[1] === best[1]) && entries.length > 1 ? 'all' : best[0];
    return { value, raw, index: choices.findIndex((c) => String(c.value) === String(value)) };
  }
  let value = Number(raw);
  if (spec.per) value /= Number(readPath(summary, spec.per));
  if (!Number.isFinite(value)) return null;
  if (spec.pick === 'compare') {
    const sign = Math.abs(value - 1) < 1e-9 ? 0 : Math.sign(value - 1);
    return { value, raw, index: choices.findIndex((c) => Number(c.value) === sign) };
  }
  let index = -1;
  let best = Infinity;
  choices.forEach((c, i) => {
    const scale = Math.max(Math.abs(Number(c.value)), Math.abs(value), 1e-12);
    const distance = Math.abs(Number(c.value) - value) / scale;
    if (distance < best) { best = distance; index = i; }
  });
  return { value, raw, index, exact: best < 0.05 };
}

/**
 * Index of the frame at which the run shows the answer (see the header), or null before the run is complete.
 * A predicate no frame meets (the parameters changed what the run does) falls back to the last frame.
 */
export function answerFrame(at, frames, summary, source = 'summary') {
  if (!frames?.length) return null;
  const last = frames.length - 1;
  if (!at) return source === 'projection' ? 0 : last;
  let index = -1;
  if (at.phase) {
    index = frames.findIndex((f) => f.phase === at.phase);
  } else if (at.frame) {
    const target = Number(readPath(summary, at.reaches));
    if (Number.isFinite(target)) index = frames.findIndex((f) => Number(readPath(f, at.frame)) >= target);
  }
  return index < 0 ? last : index;
}

function format(value, spec, summary) {
  const n = Number(value);
  switch (spec.format) {
    case 'bytes': return `${Math.round(n).toLocaleString('en-US')} B`;
    case 'ratio': return `${n.toLocaleString('en-US', { maximumFractionDigits: 2 })}×`;
    case 'percent': return `${(100 * n).toFixed(1)}%`;
    case 'rank': return `rank ${value}`;
    case 'count': {
      const count = Math.round(n);
      const unit = spec.unit ? ` ${spec.unit}${count === 1 ? '' : 's'}` : '';
      return `${count.toLocaleString('en-US')}${unit}`;
    }
    case 'psi': return `${n.toLocaleString('en-US', { maximumFractionDigits: 2 })}Ψ`;
    case 'compare': {
      const first = Number(readPath(summary, spec.per));
      const last = Number(readPath(summary, spec.read));
      const digits = { maximumSignificantDigits: 3 };
      return `${first.toLocaleString('en-US', digits)} → ${last.toLocaleString('en-US', digits)}`;
    }
    default: return String(value);
  }
}

function playerOf(sim) {
  return (window.distdeck?.players ?? []).find((p) => p.element === sim) ?? null;
}

class Prediction {
  constructor(box) {
    this.box = box;
    this.slide = box.closest('section');
    this.sim = this.slide.querySelector('.live-sim');
    this.spec = JSON.parse(box.dataset.predict);
    this.at = box.dataset.answerAt ? JSON.parse(box.dataset.answerAt) : null;
    this.picked = null;
    this.projections = new Map(); // the run's parameters (JSON) -> its replay on the modelled cluster, once answered
    this.answerEl = box.querySelector('.predict-answer');
    this.buttons = Array.from(box.querySelectorAll('.predict-choice'));
    for (const button of this.buttons) {
      button.addEventListener('click', () => this.pick(Number(button.dataset.index)));
    }
    this.setRevealed(false);
    // The player registers its stepper when it mounts, and writes its status on the element:
    // wrap the stepper once it is there, and read the answer whenever a run finishes.
    this.observer = new MutationObserver(() => { this.wrap(); this.update(); });
    // (and the frame on screen: the answer shows once the run has reached the frame that shows it).
    this.observer.observe(this.sim, { attributes: true, attributeFilter: ['data-status', 'data-frame'], childList: true });
    document.addEventListener('distdeck:position', () => this.wrap());
    this.wrap();
  }

  pick(index) {
    if (!this.buttons[index]) return;
    this.picked = index;
    this.buttons.forEach((b, i) => b.setAttribute('aria-pressed', String(i === index)));
    this.box.dataset.picked = LETTERS[index];
    this.update();
    // The speaker notes show the vote: the deck's position, told again, redraws them.
    stepsChanged(this.slide);
  }

  wrap() {
    const inner = stepperOf(this.slide);
    if (!inner || inner[WRAPPED]) return;
    const prediction = this;
    registerStepper(this.slide, {
      [WRAPPED]: true,
      get count() { return inner.count + 1; },
      get index() { return prediction.revealed ? inner.index + 1 : 0; },
      get pending() { return inner.pending; },
      go(k) {
        prediction.setRevealed(k > 0);
        inner.go(Math.max(0, k - 1));
      },
    });
  }

  setRevealed(revealed) {
    this.revealed = revealed;
    this.slide.dataset.predictState = revealed ? 'revealed' : 'asking';
    this.update();
  }

  /** Until the run shows the answer: the room's vote, and that the run will tell. */
  waiting(text) {
    const vote = this.picked === null ? '' : `The room predicted ${LETTERS[this.picked]}. `;
    this.answerEl.textContent = `${vote}${text}`;
    delete this.box.dataset.answer;
    this.slide.dataset.predictAnswer = 'pending';
  }

  update() {
    const { box, spec } = this;
    for (const b of this.buttons) b.classList.remove('predict-correct', 'predict-wrong');
    if (!this.revealed) {
      this.answerEl.textContent = '';
      delete box.dataset.answer;
      delete this.slide.dataset.predictAnswer;
      return;
    }
    const player = playerOf(this.sim);
    const status = player?.status ?? this.sim.dataset.status;
    if (status === 'error' || status === 'unavailable') {
      this.waiting('No run to read the answer from.');
      return;
    }
    const source = status === 'done' ? this.sourceOf(player) : null;
    const answer = source ? answerOf(spec, source) : null;
    const at = status === 'done' ? answerFrame(this.at, player?.frames, player?.summary, spec.source) : null;
    const onScreen = Number(this.sim.dataset.frame ?? player?.index ?? 0);
    if (!answer || at === null || onScreen < at) {
      this.waiting(spec.source === 'projection' && status === 'done' && !answer
        ? 'The modelled cluster is being timed: its answer appears with it.'
        : 'Watch the run: it answers the question.');
      return;
    }
    this.slide.dataset.predictAnswer = 'shown';
    const measured = format(answer.value, spec, source);
    const path = `${spec.source === 'projection' ? 'projection' : 'summary'}: ${spec.read}${spec.per ? ` ÷ ${spec.per}` : ''}`;
    box.dataset.answer = answer.index >= 0 ? LETTERS[answer.index] : '';
    box.dataset.measured = measured;
    if (answer.index >= 0) this.buttons[answer.index].classList.add('predict-correct');
    if (this.picked !== null && this.picked !== answer.index) this.buttons[this.picked].classList.add('predict-wrong');
    // The choice's first words ("8" of "8, all of them"): the badge stays one line beside the title.
    const short = (label) => String(label).split(/[:,(]/)[0].trim();
    const choice = answer.index >= 0
      ? `${LETTERS[answer.index]}, ${short(spec.choices[answer.index].label)}${answer.exact === false ? ' (nearest)' : ''}`
      : 'none of the choices (the parameters changed)';
    const verdict = this.picked === null ? '' : (this.picked === answer.index ? ' ✓ as predicted' : ` ✗ predicted ${LETTERS[this.picked]}`);
    this.answerEl.replaceChildren(
      Object.assign(document.createElement('strong'), {
        textContent: `${spec.source === 'projection' ? 'The modelled cluster' : 'The run'}: ${measured}`,
      }),
      document.createTextNode(` → ${choice}${verdict}`),
      Object.assign(document.createElement('span'), { className: 'predict-source', textContent: path }),
    );
  }

  /** What the answer is read from: the run's summary, or (source "projection") the estimator's replay of the
   *  run, fetched once per set of parameters; null until it is there. */
  sourceOf(player) {
    if (this.spec.source !== 'projection') return player?.summary ?? null;
    const params = player.meta?.params ?? player.params ?? {}; // the run's own, defaults included (as the view)
    const key = JSON.stringify(params);
    if (!this.projections.has(key)) {
      this.projections.set(key, null);
      // The projected view's own fetch, loaded when a question first asks for it: the deck's modules do not
      // pull the player's in up front.
      import('../player/views/projected.js').then(({ fetchProjection }) => fetchProjection(player.scenario, params)).then(
        (estimate) => { this.projections.set(key, estimate); this.update(); },
        () => { this.projections.set(key, {}); this.update(); }, // no modelled cluster: nothing to read
      );
    }
    return this.projections.get(key);
  }
}

// The print view has no steps to answer with: the question stays hidden there, the run's slide prints as it is.
const printing = document.documentElement.classList.contains('print-mode');
export const predictions = printing ? []
  : Array.from(document.querySelectorAll('.predict[data-predict]'), (box) => new Prediction(box));

/** The question on screen (the current slide's, still asking), or null. */
function asking() {
  const slide = document.querySelector('.reveal .slides > section.present');
  return predictions.find((p) => p.slide === slide && !p.revealed) ?? null;
}

/** Record the room's vote (a letter A–D, or an index) on the question on screen; true if there was one. */
export function vote(choice) {
  const question = asking();
  const index = typeof choice === 'number' ? choice : LETTERS.indexOf(String(choice).toUpperCase());
  if (!question || !question.buttons[index]) return false;
  question.pick(index);
  return true;
}

const KEY_CODES = { 65: 'A', 66: 'B', 67: 'C', 68: 'D' };

/** A–D from a key event (a letter without modifiers, not typed into a field), or null. */
export function voteKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey) return null;
  if (event.target?.closest?.('input, select, textarea, [contenteditable]')) return null;
  return KEY_CODES[event.keyCode] ?? null;
}

if (predictions.length) {
  // Before reveal.js's own keys (B would black the screen): on a question A–D vote, elsewhere they do what they did.
  window.addEventListener('keydown', (event) => {
    const letter = voteKey(event);
    if (letter && vote(letter)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);
}
window.distdeck = Object.assign(window.distdeck || {}, { predictions, vote });
