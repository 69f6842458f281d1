/**
 * What every deck page runs, the whole deck (boot.js) and a one-slide widget (widget.js): reveal.js
 * configured (keyboard, overview, help, progress, scaling and touch), and our controllers wired:
 * steps, location (hash), top bar, announcements, embedding. The entries add their own concerns
 * (the deck: formulas, the speaker view, print) around begin() and ready().
 */
import Reveal from '../../vendor/reveal.js/reveal.mjs';
import * as steps from './steps.js';
import * as location from './location.js';
import * as topbar from './topbar.js';
import * as a11y from './a11y.js';
import * as embed from './embed.js';
import * as input from './input.js';

export { Reveal };

export const config = JSON.parse(document.getElementById('deck-config').textContent);

/** Before Reveal.initialize: its postMessage API guarded, and our steps listening to its events. */
export function begin() {
  embed.guardRevealPostMessage();
  steps.attach(Reveal);
}

/**
 * reveal.js's configuration: `size` and `margin` are the slide's; `keyboardCondition`, `url` and
 * `plugins` the entry's (the deck's speaker view).
 */
export function revealOptions({ size, margin, keyboardCondition = null, url, plugins = [] }) {
  const reducedMotion = a11y.prefersReducedMotion();
  return {
    ...size,
    margin,
    hash: false, // location.js owns the hash: #/<slide-id>/<step>
    respondToHashChanges: false,
    history: false,
    fragmentInURL: false,
    navigationMode: 'linear',
    // No scroll view on narrow screens (reveal's default below 435 px): the slides scale down as
    // on any screen, so a phone or a narrow iframe steps through live runs by swipe and tap.
    scrollActivationWidth: null,
    controls: true,
    controlsTutorial: false,
    progress: true,
    slideNumber: 'c/t',
    showSlideNumber: 'print', // on screen the top bar (or the embed bar) shows n/N
    center: false,
    transition: reducedMotion ? 'none' : 'slide',
    backgroundTransition: reducedMotion ? 'none' : 'fade',
    transitionSpeed: 'fast',
    autoAnimate: !reducedMotion,
    keyboard: input.keyBindings(Reveal),
    keyboardCondition,
    postMessage: true, // same-origin only, see embed.guardRevealPostMessage
    postMessageEvents: false, // reveal would post every event to the parent with origin '*'
    pdfSeparateFragments: true,
    pdfMaxPagesPerSlide: 1,
    hideInactiveCursor: !config.embed,
    url,
    plugins,
  };
}

/** After Reveal.initialize: input, announcements and the top bar (or the embed bar's position). */
export function wire() {
  input.start(Reveal);
  a11y.start();
  topbar.start();
}

/** The embed bar (`chrome`: an embedded page's, not a speaker preview's) and the postMessage API. */
export function embedding({ chrome }) {
  if (chrome) embed.startChrome(config);
  embed.startMessageApi(config.postMessageOrigins);
}

/** Last: the deep link followed, the first position told, the page marked ready. */
export function ready() {
  location.start();
  document.dispatchEvent(new CustomEvent('distdeck:position', { detail: steps.position() }));
  document.documentElement.classList.add('deck-ready');
  window.distdeck = Object.assign(window.distdeck || {}, { reveal: Reveal, next: steps.next, prev: steps.prev, position: steps.position });
}
