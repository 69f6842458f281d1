/**
 * Starts the whole deck: typesets formulas, starts reveal.js and our controllers (core.js), and adds
 * what only the deck has: reveal.js's speaker notes (the speaker view, synced to our steps) and
 * print. A widget page starts with widget.js instead, which loads none of these.
 */
import { Reveal, begin, config, embedding, ready, revealOptions, wire } from './core.js';
import * as location from './location.js';
import * as topbar from './topbar.js';
import * as embed from './embed.js';
import * as speaker from './speaker.js';
import { typeset, typesetNear } from './math.js';
import { isPrintView, preferEndStates, printLiveSlides, stepsToFragments } from './print.js';

const printing = isPrintView(config);
if (printing) {
  document.documentElement.classList.add('print-mode');
  preferEndStates();
}
const deckElement = document.getElementById('deck');

// Formulas: all of them to print; else those of the slide the page opens at and its neighbours, the
// others as slides come near (below). KaTeX is fetched only if one of them has a formula.
await (printing ? typeset() : typesetNear(location.initialSlide()));
// The speaker view (S): reveal's notes plugin (80 KB), registered once the deck shows (reveal inits a
// plugin registered after it is ready), so that it is not on the way of the first paint.
const notesPlugin = import('../../vendor/reveal.js/plugin/notes.mjs');
if (printing) stepsToFragments();
begin();
speaker.interceptMessages();
if (printing) Reveal.on('pdf-ready', () => printLiveSlides(Reveal));
Reveal.on('slidechanged', (event) => typesetNear(event.currentSlide));
Reveal.on('overviewshown', () => typeset()); // the overview shows every slide

await Reveal.initialize(revealOptions({
  // The slide size and margin: the page's (deck.html.j2), which paints the first slide with them before this runs.
  size: { width: Number(deckElement.dataset.slideWidth), height: Number(deckElement.dataset.slideHeight) },
  margin: Number(deckElement.dataset.slideMargin),
  keyboardCondition: config.embed && !speaker.isReceiver ? () => embed.hasKeyboard() : null,
  // The speaker view (S) previews the deck itself, never the page around an embed, nor the embed bar.
  url: config.embed ? embed.speakerUrl(config) : undefined,
  plugins: [speaker.plugin],
}));
Reveal.registerPlugin((await notesPlugin).default);

wire();
topbar.noteUnknownTrack(config);
speaker.start(Reveal, config);
embedding({ chrome: config.embed && !speaker.isReceiver });
ready();
