/**
 * The deck inside someone else's page (/?embed=1 in an iframe): a click anywhere takes the
 * keyboard (with a visible focus ring), full-screen and open-in-new-tab buttons, and a small
 * postMessage API that only obeys origins allowed in settings and only answers the sender.
 *
 * Messages (objects): {type: 'distdeck:subscribe' | 'distdeck:state' | 'distdeck:next' |
 * 'distdeck:prev' | 'distdeck:go', slide?, step?}. Replies and updates:
 * {type: 'distdeck:position', slide, step, stepCount, slideIndex, slideCount, pending}.
 */
import { goTo, next, position, prev } from './steps.js';
import { hashFor } from './location.js';

const subscribers = new Map(); // window -> origin it subscribed from

export function originAllowed(origin, allowed) {
  return origin !== 'null' && (allowed.includes('*') || allowed.includes(origin));
}

function wireMessage(pos) {
  return {
    type: 'distdeck:position', slide: pos.id, step: pos.step, stepCount: pos.stepCount,
    slideIndex: pos.slideIndex, slideCount: pos.slideCount, pending: pos.pending,
  };
}

/**
 * reveal.js's own postMessage API (kept on: the speaker view drives the deck through it) does
 * not check the sender. Let only same-origin windows reach it; must run before Reveal starts.
 */
export function guardRevealPostMessage() {
  window.addEventListener('message', (event) => {
    if (typeof event.data === 'string' && event.origin !== window.location.origin) {
      event.stopImmediatePropagation();
    }
  });
}

export function startMessageApi(allowedOrigins) {
  window.addEventListener('message', (event) => {
    const data = event.data;
    if (!data || typeof data !== 'object' || typeof data.type !== 'string' || !data.type.startsWith('distdeck:')) return;
    if (!originAllowed(event.origin, allowedOrigins) || !event.source) return;
    switch (data.type) {
      case 'distdeck:subscribe':
        subscribers.set(event.source, event.origin);
        break;
      case 'distdeck:next': next(); break;
      case 'distdeck:prev': prev(); break;
      case 'distdeck:go': {
        const slide = typeof data.slide === 'string' ? document.getElementById(data.slide) : null;
        if (slide && slide.matches('.reveal .slides > section')) goTo(slide, Number.isInteger(data.step) ? data.step : 0);
        break;
      }
      case 'distdeck:state': break;
      default: return;
    }
    // Always to the sender's own origin, never '*'.
    event.source.postMessage(wireMessage(position()), event.origin);
  });
  document.addEventListener('distdeck:position', (event) => {
    for (const [target, origin] of subscribers) target.postMessage(wireMessage(event.detail), origin);
  });
}

/**
 * A widget page is drawn at the size of its frame (reveal's scale 1) up to 1280 × 720, so that
 * text set in pixels stays that size in a blog's 640 × 360 iframe; above that it scales up.
 */
export function widgetSize() {
  const width = Math.max(320, window.innerWidth);
  const height = Math.max(200, window.innerHeight);
  if (width >= 1280 && height >= 720) return { width: 1280, height: 720 };
  return { width, height };
}

/**
 * How many views a widget shows side by side: one per 400 px of frame width (a view narrower
 * than that cannot keep its labels readable), one in a frame under 300 px tall; a tall narrow
 * frame (a phone held upright) stacks two (deck.css), rather than stretch one down its height.
 * Run before the player mounts (it reads data-views once).
 */
export function chooseWidgetViews(root = document) {
  const sim = root.querySelector('.widget-slide .live-sim');
  if (!sim) return;
  let views;
  try { views = JSON.parse(sim.dataset.views || '[]'); } catch { return; }
  if (!Array.isArray(views) || views.length <= 1) return;
  const tall = window.innerHeight >= 600 && window.innerHeight >= 1.5 * window.innerWidth;
  const fit = window.innerHeight < 300 ? 1 : Math.max(tall ? 2 : 1, Math.floor(window.innerWidth / 400));
  if (views.length > fit) sim.dataset.views = JSON.stringify(views.slice(0, fit));
}

export function hasKeyboard() {
  return document.hasFocus();
}

/**
 * What the embedded deck's speaker view (S) previews: the deck's own page (the embed's `?embed=1`
 * dropped, so no embed bar), never the blog page around the iframe. (A widget has no speaker view.)
 */
export function speakerUrl(config) {
  const url = new URL(config.root || './', document.baseURI);
  if (config.track) url.searchParams.set('track', config.track); // the previews show the same talk
  return url.href;
}

/**
 * Open-in-a-new-tab: the page the server named (the deck, or the widget with its query), with the
 * reader's control changes and the current slide and step.
 */
function openHref(base, config) {
  const url = new URL(base, document.baseURI);
  const player = config.widget ? window.distdeck?.players?.[0] : null;
  if (player?.params) {
    for (const name of [...(config.widget.controls ?? []), ...Object.keys(config.widget.params ?? {})]) {
      const value = player.params[name];
      if (value != null) url.searchParams.set(name, String(value));
    }
  }
  url.hash = hashFor(position());
  return url.href;
}

export function startChrome(config = {}) {
  const root = document.documentElement;
  const deck = document.getElementById('deck');
  const syncFocus = () => root.classList.toggle('deck-focused', document.hasFocus());
  window.addEventListener('focus', syncFocus);
  window.addEventListener('blur', syncFocus);
  // A click anywhere (not only on a control) gives this frame the keyboard.
  document.addEventListener('pointerdown', () => {
    if (!deck.contains(document.activeElement) && !document.activeElement?.closest?.('.embed-chrome')) {
      deck.focus({ preventScroll: true });
    }
    window.setTimeout(syncFocus, 0);
  });
  syncFocus();
  // The bar sits over the slide's top right corner: the widget's title keeps clear of it (deck.css).
  // Set on the title alone: a custom property on the root would restyle the whole page at every step.
  const bar = document.querySelector('.embed-chrome');
  const title = document.querySelector('.widget-slide h2');
  if (bar && title && window.ResizeObserver) {
    new ResizeObserver(() => title.style.setProperty('--embed-chrome-width', `${Math.ceil(bar.offsetWidth)}px`)).observe(bar);
  }

  document.getElementById('embed-fullscreen')?.addEventListener('click', () => {
    if (document.fullscreenElement) document.exitFullscreen();
    else root.requestFullscreen?.().catch(() => {});
  });
  const open = document.getElementById('embed-open');
  if (!open) return;
  // The page set the link to what to open (the deck's root, or the widget's own page).
  const base = open.href.split('#')[0];
  const refresh = () => { open.href = openHref(base, config); };
  document.addEventListener('distdeck:position', refresh);
  document.addEventListener('change', () => window.setTimeout(refresh, 0)); // a control re-ran the widget
  open.addEventListener('click', refresh); // before the browser follows the link
  open.addEventListener('pointerenter', refresh);
}
