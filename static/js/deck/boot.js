/**
 * Starts the deck: typesets formulas, configures reveal.js (which does keyboard, overview,
 * speaker notes, help, progress, scaling, print and touch), then wires our controllers:
 * steps, location (hash), top bar, announcements, embedding, the speaker view, print.
 */
import Reveal from '../../vendor/reveal.js/reveal.mjs';
import * as steps from './steps.js';
import * as location from './location.js';
import * as topbar from './topbar.js';
import * as a11y from './a11y.js';
import * as embed from './embed.js';
import * as input from './input.js';
import * as speaker from './speaker.js';
import { typeset, typesetNear } from './math.js';
import { isPrintView, preferEndStates, printLiveSlides, stepsToFragments } from './print.js';

const config = JSON.parse(document.getElementById('deck-config').textContent);
const printing = isPrintView(config);
if (printing) {
  document.documentElement.classList.add('print-mode');
  preferEndStates();
}
const reducedMotion = a11y.prefersReducedMotion();

if (config.widget) embed.chooseWidgetViews(); // before the player mounts (the next module script)
const deckElement = document.getElementById('deck');
// The slide size and margin: the page's (deck.html.j2), which paints the first slide with them before this runs.
const size = config.widget ? embed.widgetSize()
  : { width: Number(deckElement.dataset.slideWidth), height: Number(deckElement.dataset.slideHeight) };

// Formulas: all of them to print; else those of the slide the page opens at and its neighbours, the
// others as slides come near (below). KaTeX is fetched only if one of them has a formula.
await (printing ? typeset() : typesetNear(location.initialSlide()));
// The speaker view (S): reveal's notes plugin (80 KB), registered once the deck shows (reveal inits a
// plugin registered after it is ready), so that it is not on the way of the first paint.
const notesPlugin = import('../../vendor/reveal.js/plugin/notes.mjs');
if (printing) stepsToFragments();
embed.guardRevealPostMessage();
speaker.interceptMessages();
steps.attach(Reveal);
if (printing) Reveal.on('pdf-ready', () => printLiveSlides(Reveal));
Reveal.on('slidechanged', (event) => typesetNear(event.currentSlide));
Reveal.on('overviewshown', () => typeset()); // the overview shows every slide

await Reveal.initialize({
  ...size,
  margin: config.widget ? 0 : Number(deckElement.dataset.slideMargin),
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
  // Embedded: keys only while this frame has the focus (a click gives it).
  keyboardCondition: config.embed && !speaker.isReceiver ? () => embed.hasKeyboard() : null,
  postMessage: true, // same-origin only, see embed.guardRevealPostMessage
  postMessageEvents: false, // reveal would post every event to the parent with origin '*'
  pdfSeparateFragments: true,
  pdfMaxPagesPerSlide: 1,
  hideInactiveCursor: !config.embed,
  // The speaker view (S) previews the deck itself, never the page around an embed, nor the embed bar.
  url: config.embed ? embed.speakerUrl(config) : undefined,
  plugins: [speaker.plugin],
});
Reveal.registerPlugin((await notesPlugin).default);

if (config.widget) window.addEventListener('resize', () => Reveal.configure(embed.widgetSize()));
input.start(Reveal);
a11y.start();
topbar.start();
topbar.noteUnknownTrack(config);
speaker.start(Reveal, config);
if (config.embed && !speaker.isReceiver) embed.startChrome(config);
embed.startMessageApi(config.postMessageOrigins);
location.start();
document.dispatchEvent(new CustomEvent('distdeck:position', { detail: steps.position() }));
document.documentElement.classList.add('deck-ready');
window.distdeck = Object.assign(window.distdeck || {}, { reveal: Reveal, next: steps.next, prev: steps.prev, position: steps.position });
