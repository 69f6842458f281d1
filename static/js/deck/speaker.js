/**
 * The speaker view (reveal.js's notes plugin, key S) follows our steps, both ways.
 *
 * reveal.js syncs the speaker window by posting `Reveal.getState()` between the windows and
 * calling `setState` on the other side; its preview iframes load the deck with `?receiver`.
 * We add our step to that state (`distdeckStep`), apply it on `setState`, post the state when a
 * step changes (as reveal posts it on a fragment), and make the "upcoming" preview's `next`
 * show the slide's next step. The speaker notes of a stepped slide get a line with the step
 * and the live run's caption, so the presenter reads what the audience sees.
 */
import { goTo, next, position, stepperOf } from './steps.js';
import * as pacing from './pacing.js';

export const isReceiver = /[?&]receiver\b/i.test(window.location.search);
if (isReceiver) document.documentElement.classList.add('receiver');

let deck = null;
const VOTE_KEYS = { 65: 'A', 66: 'B', 67: 'C', 68: 'D' };
// The speaker window's pacing panel (pacing.js), in the presenting window only.
let pace = null;

function stepOf(pos) {
  return pos.wantedStep ?? pos.step;
}

/** A reveal.js plugin: its init gets the deck API object that the notes plugin and postMessage use. */
export const plugin = {
  id: 'distdeck-speaker',
  init(api) {
    deck = api;
    const revealState = api.getState.bind(api);
    api.getState = () => {
      const state = revealState();
      try {
        state.distdeckStep = stepOf(position());
      } catch { /* before the deck is ready there is no current slide */ }
      return state;
    };
  },
};

// Where this window and the other agree the deck is (set by the other window, or reported to it):
// a preview reports only a position that differs, that is, what its presenter did.
let known = null;

function applyState(state) {
  const slide = deck.getHorizontalSlides()[state.indexh];
  if (!slide) return;
  known = `${slide.id}/${state.distdeckStep}`;
  if (typeof state.paused === 'boolean' && state.paused !== deck.isPaused()) deck.togglePause(state.paused);
  const pos = position();
  if (pos.slide === slide && stepOf(pos) === state.distdeckStep) return;
  goTo(slide, state.distdeckStep);
}

/** The "upcoming" preview: the next step of this slide if it has one, else the next slide. */
function upcoming() {
  const pos = position();
  const step = stepOf(pos);
  // A live slide whose player has not registered yet (it loads d3 first) has its steps to come.
  const unknown = !stepperOf(pos.slide) && pos.slide.querySelector('.live-sim');
  if (step + 1 < pos.stepCount || pos.pending || unknown) goTo(pos.slide, step + 1);
  else next({ skipSteps: true });
}

/**
 * Must run before Reveal.initialize, so that it sees the speaker window's messages before
 * reveal's own postMessage API does (which would apply a state without our step).
 */
export function interceptMessages() {
  window.addEventListener('message', (event) => {
    if (typeof event.data !== 'string' || event.origin !== window.location.origin || !deck) return;
    let data;
    try { data = JSON.parse(event.data); } catch { return; }
    if (data?.namespace === 'reveal-notes' && event.source && event.source !== window) {
      pace?.heard(event.source); // the speaker window: its handshake, calls and heartbeat (1 Hz)
    }
    if (data?.method === 'setState' && typeof data.args?.[0]?.distdeckStep === 'number') {
      event.stopImmediatePropagation();
      applyState(data.args[0]);
    } else if (data?.method === 'next' && isReceiver) {
      event.stopImmediatePropagation();
      upcoming();
    } else if (data?.method === 'triggerKey' && isReceiver && VOTE_KEYS[data.args?.[0]]) {
      // A–D pressed in the speaker window (it sends its keys to this preview): the room's vote, recorded in
      // the presenting window (the speaker window's opener), if its slide is asking; else reveal's key.
      let voted = false;
      try { voted = Boolean(window.parent.opener?.distdeck?.vote?.(VOTE_KEYS[data.args[0]])); } catch { /* not ours */ }
      if (voted) event.stopImmediatePropagation();
    }
  });
}

function stepNote(slide) {
  let note = slide.querySelector('aside.notes.step-note');
  if (!note) {
    note = Object.assign(document.createElement('aside'), { className: 'notes step-note' });
    // First among the slide's notes: the speaker window shows it above the slide's own notes.
    const own = slide.querySelector('aside.notes');
    if (own) own.before(note);
    else slide.append(note);
  }
  return note;
}

/** On a "predict, then run" question: the question, its choices and the room's vote (predict.js), for the notes. */
function questionNote(slide) {
  const box = slide.querySelector('.predict');
  if (!box || slide.dataset.predictState !== 'asking') return null;
  const question = box.querySelector('.predict-question')?.textContent.trim() ?? '';
  const choices = Array.from(box.querySelectorAll('.predict-choice'), (b) => b.textContent.replace(/\s+/g, ' ').trim());
  const vote = box.dataset.picked ? `Room's vote: ${box.dataset.picked}` : 'No vote yet: keys A–D record it';
  return { question, choices, vote };
}

/** What the run on the slide is at, for the presenter only: "frame 10 of 19" (the audience counts steps). */
function frameNote(slide) {
  const sim = slide.querySelector('.live-sim[data-frames]');
  return sim ? ` · frame ${Number(sim.dataset.frame) + 1} of ${sim.dataset.frames}` : '';
}

/** The speaker notes' line for a stepped slide: "Step 4 of 19 · frame 6 of 22: <the run's caption>", or the
 *  question with its choices and the room's vote while the slide asks it. */
export function updateStepNote(pos) {
  if (pos.stepCount <= 1 && !pos.pending) return;
  const counter = `Step ${pos.step + 1} of ${pos.stepCount}${pos.pending ? '+' : ''}`;
  const asked = questionNote(pos.slide);
  const strong = document.createElement('strong');
  const line = document.createElement('p');
  if (asked) {
    strong.textContent = `${counter} · question`;
    const list = document.createElement('ol');
    list.type = 'A';
    list.append(...asked.choices.map((text) => Object.assign(document.createElement('li'), { textContent: text.replace(/^[A-D]\s*/, '') })));
    const vote = Object.assign(document.createElement('p'), { className: 'step-note-vote' });
    vote.append(Object.assign(document.createElement('strong'), { textContent: asked.vote }));
    line.append(strong, `: ${asked.question}`);
    stepNote(pos.slide).replaceChildren(line, vote, list); // the vote before the choices: above the fold
    return;
  }
  const caption = pos.slide.querySelector('.sim-caption')?.textContent.trim()
    || Array.from(pos.slide.querySelectorAll(`[data-step="${pos.step}"][data-step-label]`))
      .map((el) => el.dataset.stepLabel).join(' ');
  strong.textContent = `${counter}${frameNote(pos.slide)}`;
  line.append(strong, caption ? `: ${caption}` : '');
  stepNote(pos.slide).replaceChildren(line);
}

/** Call once reveal.js is ready. `config`: the page's, with the slides' time budgets (config.pacing). */
export function start(reveal, config = {}) {
  if (isReceiver) {
    // The current-slide preview reports its position to the speaker window; reveal's own reports
    // (postMessageEvents) carry no step, so ours replace them.
    const reporting = reveal.getConfig().postMessageEvents && window.parent !== window;
    if (!reporting) return;
    reveal.configure({ postMessageEvents: false });
    document.addEventListener('distdeck:position', (event) => {
      // Not before the speaker window has set a position (the preview loads at the deck's start),
      // and not a position it set (its players' frames arriving would otherwise echo it back).
      const here = `${event.detail.id}/${stepOf(event.detail)}`;
      if (known === null || here === known) return;
      known = here;
      window.parent.postMessage(JSON.stringify({ namespace: 'reveal', eventName: 'slidechanged', state: deck.getState() }),
        window.location.origin);
    });
    return;
  }
  if (config.pacing) pace = pacing.create(config, reveal.getHorizontalSlides().map((slide) => slide.id));
  let last = null;
  const told = (pos) => {
    updateStepNote(pos);
    const key = `${pos.id}/${stepOf(pos)}/${pos.stepCount}/${pos.slide.querySelector('.sim-caption')?.textContent ?? ''}`
      + `/${pos.slide.querySelector('.live-sim')?.dataset.frame ?? ''}`
      + `/${pos.slide.dataset.predictState ?? ''}/${pos.slide.querySelector('.predict')?.dataset.picked ?? ''}`;
    if (key === last) return;
    last = key;
    // The notes plugin posts the state (and the notes) to the speaker window on reveal's fragment
    // events; a step is our fragment.
    reveal.getRevealElement().dispatchEvent(new CustomEvent('fragmentshown', { detail: { distdeckStep: true } }));
  };
  document.addEventListener('distdeck:position', (event) => {
    pace?.moved(event.detail);
    told(event.detail);
  });
  // A step's frames play one after another: the notes follow the caption and frame on screen.
  document.addEventListener('distdeck:frame', (event) => {
    const pos = position();
    if (event.detail.slide === pos.id) told(pos);
  });
}
