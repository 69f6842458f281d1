/**
 * The URL hash names the slide and the step: #/<slide-id>/<step> (step counted from 0).
 * reveal.js's own hash handling is off (its #/id/n would read our step as a vertical index).
 */
import { goTo, position } from './steps.js';
import { announce } from './a11y.js';

export function parseHash(hash) {
  const match = /^#\/([a-z0-9][a-z0-9-]*)(?:\/(\d+))?\/?$/.exec(hash);
  if (!match) return null;
  return { id: match[1], step: match[2] === undefined ? 0 : parseInt(match[2], 10) };
}

export function hashFor({ id, step, wantedStep }) {
  return `#/${id}/${wantedStep ?? step}`;
}

/** The hash's slide and step: {slide, step}, slide null if the hash names none. */
function hashTarget() {
  const target = parseHash(window.location.hash);
  let slide = target && document.getElementById(target.id);
  if (!slide && target && /^\d+$/.test(target.id)) {
    // reveal.js's own form, #/<index>/0: what its speaker view opens its previews at.
    slide = document.querySelectorAll('.reveal .slides > section')[parseInt(target.id, 10)] ?? null;
    if (slide) target.step = 0;
  }
  return { slide: slide?.matches('.reveal .slides > section') ? slide : null, step: target?.step ?? 0 };
}

/** The slide the page opens at, before reveal.js has started: the deep link's, or the first. */
export function initialSlide() {
  return hashTarget().slide ?? document.querySelector('.reveal .slides > section');
}

function followHash() {
  if (!window.location.hash || window.location.hash === '#/') return;
  const { slide, step } = hashTarget();
  if (!slide) {
    announce(`There is no slide at ${window.location.hash}; showing the current slide instead.`);
    writeHash(position());
    return;
  }
  goTo(slide, step);
}

function writeHash(pos) {
  const hash = hashFor(pos);
  if (window.location.hash !== hash) {
    // replaceState: stepping through a talk should not fill the back button's history.
    window.history.replaceState(null, '', window.location.pathname + window.location.search + hash);
  }
}

/** Call once reveal.js is ready: lands on the deep link, then keeps the hash in step. */
export function start() {
  followHash();
  writeHash(position());
  document.addEventListener('distdeck:position', (event) => writeHash(event.detail));
  window.addEventListener('hashchange', followHash);
}
