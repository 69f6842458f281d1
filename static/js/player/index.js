/**
 * Mounts a Player on a `.live-sim` placeholder (slides/macros.html.j2's `live` macro) when its
 * slide comes near: the slide shown, the one before it and the one after it (reveal.js's own
 * viewDistance idea), so → and ← rarely wait, and a far slide's player costs the page nothing (no
 * DOM built, no stream open) until the talk gets there. A deep link mounts the players around the
 * slide it opens at; print mounts every one (each live slide's frames go in the PDF). Each player
 * whose run the estimator can replay gets the "time on" control (cluster.js).
 */
import { Player } from './player.js';
import { attachCluster } from './cluster.js';
import { nextTask } from '../tasks.js';

// The slides either side of the one shown whose players mount and stream (reveal's viewDistance, here 1).
const NEAR = 1;

function loadD3() {
  if (window.d3) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const script = Object.assign(document.createElement('script'), { src: new URL('../../vendor/d3/d3.min.js', import.meta.url).href });
    script.onload = resolve;
    script.onerror = () => reject(new Error('d3 failed to load'));
    document.head.append(script);
  });
}

function readConfig() {
  try { return JSON.parse(document.getElementById('deck-config')?.textContent ?? '{}'); } catch { return {}; }
}

const config = readConfig();
// The same test as print.js's isPrintView (not imported: this module must not pull the deck's modules in).
const printing = Boolean(config.printPdf) || /[?&]print-pdf\b/i.test(window.location.search);
const players = [];
const mounted = new WeakSet();

function mount(element) {
  if (mounted.has(element)) return;
  mounted.add(element);
  const player = new Player(element);
  attachCluster(player); // "time on: this machine | N × H100": the run re-timed on a modelled cluster
  players.push(player);
}

/** The slides near the one shown: it and NEAR either side (the top-level sections, in order). */
function nearSlides() {
  const current = document.querySelector('.reveal .slides > section.present')
    ?? document.querySelector('.reveal .slides > section.widget-slide');
  if (!current) return [];
  const near = [current];
  for (let k = 0, before = current, after = current; k < NEAR; k += 1) {
    before = before?.previousElementSibling;
    after = after?.nextElementSibling;
    if (before?.matches('section')) near.push(before);
    if (after?.matches('section')) near.push(after);
  }
  return near;
}

function mountNearby() {
  const near = nearSlides();
  for (const slide of near) for (const element of slide.querySelectorAll('.live-sim')) mount(element);
  for (const player of players) if (near.includes(player.slide)) player.start();
}

await loadD3();
await nextTask(); // d3's evaluation, then the players' mounting: two long tasks on a phone, not one
if (printing) {
  // Every live slide is printed: print.js starts each one's run when it copies its page.
  for (const element of document.querySelectorAll('.live-sim')) mount(element);
} else {
  // Before the deck is ready (no slide shown yet) the page's first slide, or the deep link's, shows
  // at once: the first distdeck:position names it.
  document.addEventListener('distdeck:position', mountNearby);
  mountNearby();
}
window.distdeck = Object.assign(window.distdeck || {}, { players });
