/**
 * ?print-pdf: what the audience saw, a page per step.
 *
 * Static stepped slides: reveal.js lays out one page per slide and, with pdfSeparateFragments,
 * one page per fragment; turning each data-step part into a fragment of the same index gives
 * one page per step (stepsToFragments, before reveal starts).
 *
 * Live slides: once reveal has laid out the pages (`pdf-ready`), every player runs (the live
 * server, or the recorded run on a static host), a few at a time; each step is shown and its
 * page copied, so the PDF has the slide's story with each frame drawn. The live page itself is
 * kept, hidden, behind its copies. <html> gets `print-ready` when every page is in place.
 */
import { stepperOf } from './steps.js';

/** True for the print view: the server's ?print-pdf page, or any page opened with ?print-pdf. */
export function isPrintView(config) {
  return Boolean(config.printPdf) || /[?&]print-pdf\b/i.test(window.location.search);
}

export function stepsToFragments(root = document) {
  for (const part of root.querySelectorAll('.reveal section[data-steps] [data-step]')) {
    const step = parseInt(part.dataset.step, 10);
    if (step > 0) {
      part.classList.add('fragment');
      part.dataset.fragmentIndex = String(step);
    }
  }
}

/**
 * In print, ask every animation for its end state: views that honour prefers-reduced-motion
 * draw each frame at once instead of animating towards it.
 */
export function preferEndStates() {
  const query = '(prefers-reduced-motion: reduce)';
  const native = window.matchMedia.bind(window);
  window.matchMedia = (text) => {
    if (text.replace(/\s+/g, '') !== query.replace(/\s+/g, '')) return native(text);
    // A MediaQueryList's `matches` is a getter only: answer with a plain look-alike that matches
    // and never changes (print does not switch back).
    const list = native(text);
    const ignore = () => {};
    return { matches: true, media: list.media, onchange: null, addEventListener: ignore,
             removeEventListener: ignore, addListener: ignore, removeListener: ignore, dispatchEvent: () => true };
  };
}

const sleep = (ms) => new Promise((resolve) => window.setTimeout(resolve, ms));

async function until(test, timeoutMs, everyMs = 50) {
  const deadline = performance.now() + timeoutMs;
  while (!test()) {
    if (performance.now() > deadline) return false;
    await sleep(everyMs);
  }
  return true;
}

/** Settled: no d3 transition scheduled or running on anything in `root`. */
function animating(root) {
  return Array.from(root.querySelectorAll('*')).some((el) => el.__transition && Object.keys(el.__transition).length);
}

async function players() {
  await until(() => Array.isArray(window.distdeck?.players), 30_000);
  return window.distdeck?.players ?? [];
}

/** Form values are properties, not attributes: copy them onto the clone's controls. */
function copyControlValues(from, to) {
  const a = from.querySelectorAll('input, select, textarea');
  const b = to.querySelectorAll('input, select, textarea');
  a.forEach((el, i) => {
    const twin = b[i];
    if (!twin) return;
    if (el.type === 'checkbox' || el.type === 'radio') twin.toggleAttribute('checked', el.checked);
    else if (el.tagName === 'SELECT') {
      for (const option of twin.options) option.toggleAttribute('selected', option.value === el.value);
    } else twin.setAttribute('value', el.value);
  });
}

/**
 * Copies of a live slide's page, one per step (kept out of the document: every step re-renders).
 * A step's page is copied once every player of the slide says its views have drawn it (their modules
 * loaded, and a modelled cluster's estimate answered): a promise per player, not a guess.
 */
async function pagesFor(page, slide, players) {
  const stepper = stepperOf(slide);
  const sims = Array.from(page.querySelectorAll('.live-sim'));
  await until(() => !stepper?.pending, 180_000, 100);
  if (!stepper) return [];
  const copies = [];
  for (let k = 0; k < stepper.count; k += 1) {
    stepper.go(k);
    // End states only in print (preferEndStates): the frame is drawn at once, or once fetched.
    await Promise.all(players.map((player) => player.drawn()));
    await until(() => !sims.some(animating), 3_000, 20);
    const copy = page.cloneNode(true);
    copyControlValues(page, copy);
    copy.classList.add('pdf-step-page');
    copy.dataset.step = String(k);
    copies.push(copy);
  }
  return copies;
}

/** Call once reveal.js has laid out the print pages; resolves when every live slide's pages are in. */
export async function printLiveSlides(reveal, { concurrency = 2 } = {}) {
  const all = await players();
  const bySlide = new Map();
  for (const player of all) {
    const page = player.slide?.closest('.pdf-page');
    if (page && !bySlide.has(player.slide)) bySlide.set(player.slide, { page, players: [] });
    bySlide.get(player.slide)?.players.push(player);
  }
  const queue = Array.from(bySlide.entries());
  // On screen only (never printed): how far the live slides are, so a reader knows when to print.
  const status = Object.assign(document.createElement('p'), { className: 'print-status' });
  status.setAttribute('role', 'status');
  document.body.append(status);
  let done = 0;
  const printed = [];
  const report = () => {
    status.textContent = `Preparing the live slides for print: ${done} of ${bySlide.size}…`;
    document.documentElement.dataset.printProgress = `${done}/${bySlide.size}`;
  };
  report();
  const worker = async () => {
    while (queue.length) {
      const [slide, { page, players: own }] = queue.shift();
      for (const player of own) player.start();
      try {
        printed.push([page, await pagesFor(page, slide, own)]);
      } catch (err) {
        console.warn('distdeck: could not print', slide.id, err); // eslint-disable-line no-console
      }
      done += 1;
      report();
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  // Into the document at the end, all at once: while players render, it stays the size it was.
  for (const [page, copies] of printed) {
    if (!copies.length) continue;
    page.before(...copies);
    page.classList.add('pdf-live-source');
  }
  // A slide's own script that measures runs for a figure (pp-bubble-plot) marks itself busy.
  await sleep(500);
  await until(() => !document.querySelector('.reveal [data-busy]'), 300_000, 200);
  reveal.layout();
  status.textContent = 'Ready to print: every live slide has a page per step.';
  document.documentElement.classList.add('print-ready');
}
