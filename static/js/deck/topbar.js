/**
 * The top bar: section names (click to jump), the talk shown (a track or the whole deck: a menu of
 * the others) and "Slide n/N · Step k/K", counted in the talk shown. When the names do not
 * fit (a 1024 px projector, a phone held either way) the bar turns compact: a menu button named
 * after the current section opens the list, and the position reads "n/N · Step k/K".
 */
import { goTo } from './steps.js';
import { announce } from './a11y.js';

export function formatPosition(pos, { short = false } = {}) {
  const stepCount = Math.max(pos.stepCount, 1) + (pos.pending ? '+' : '');
  const step = pos.stepCount > 0 ? pos.step + 1 : 0;
  const waiting = pos.waiting ? ' · waiting…' : '';
  const slide = `${pos.slideIndex + 1}/${pos.slideCount}`;
  return `${short ? '' : 'Slide '}${slide} · Step ${step}/${stepCount}${waiting}`;
}

/** The talk menu: a button naming the talk shown opens the list of tracks (links to ?track=...). */
function startTrackMenu() {
  const button = document.getElementById('track-menu-button');
  const list = document.getElementById('track-list');
  if (!button || !list) return;
  const menu = button.parentElement;
  const setOpen = (open) => {
    list.hidden = !open;
    button.setAttribute('aria-expanded', String(open));
  };
  button.addEventListener('click', () => setOpen(list.hidden));
  document.addEventListener('pointerdown', (event) => { if (!menu.contains(event.target)) setOpen(false); });
  menu.addEventListener('keydown', (event) => {
    if (event.key === 'Escape' && !list.hidden) {
      setOpen(false);
      button.focus();
      event.stopPropagation();
    }
  });
}

/**
 * A static copy cannot answer ?track=unknown with a 422 as the server does: it shows the whole deck
 * and says why, on screen and to screen readers.
 */
export function noteUnknownTrack(config) {
  const wanted = new URLSearchParams(window.location.search).get('track');
  if (wanted === null || wanted === config.track) return;
  const names = Array.from(document.querySelectorAll('#track-list a'))
    .map((a) => new URL(a.href).searchParams.get('track')).filter(Boolean);
  const text = `There is no track "${wanted}"${names.length ? ` (the tracks are ${names.join(', ')})` : ''}: `
    + 'showing the whole deck.';
  const notice = Object.assign(document.createElement('p'), { className: 'track-notice', textContent: text });
  document.body.append(notice);
  announce(text);
}

export function start() {
  startTrackMenu();
  const bar = document.querySelector('.topbar');
  const label = document.getElementById('deck-position');
  const menu = document.getElementById('topbar-menu');
  const list = document.getElementById('topbar-sections');
  const buttons = Array.from(document.querySelectorAll('.topbar [data-jump]'));
  let last = null;
  const setOpen = (open) => {
    bar?.classList.toggle('open', open);
    menu?.setAttribute('aria-expanded', String(open));
  };
  const showPosition = () => {
    if (label && last) label.textContent = formatPosition(last, { short: bar?.classList.contains('compact') });
  };
  for (const button of buttons) {
    button.addEventListener('click', () => {
      const slide = document.getElementById(button.dataset.jump);
      setOpen(false);
      if (!slide) return;
      goTo(slide, 0);
      // Hand the keyboard back to the slides: a focused button would also take Space/Enter.
      document.getElementById('deck')?.focus({ preventScroll: true });
    });
  }
  if (bar && list) {
    menu?.addEventListener('click', () => setOpen(!bar.classList.contains('open')));
    // Escape or a click elsewhere closes the menu.
    document.addEventListener('pointerdown', (event) => { if (!bar.contains(event.target)) setOpen(false); });
    bar.addEventListener('keydown', (event) => {
      if (event.key === 'Escape' && bar.classList.contains('open')) {
        setOpen(false);
        menu?.focus();
        event.stopPropagation();
      }
    });
    const relayout = () => {
      setOpen(false);
      bar.classList.remove('compact');
      showPosition();
      // The list scrolls sideways when its names are wider than the room the bar leaves it.
      bar.classList.toggle('compact', list.scrollWidth > list.clientWidth + 1);
      showPosition();
    };
    new ResizeObserver(relayout).observe(bar);
    document.fonts?.ready.then(relayout);
    relayout();
  }
  document.addEventListener('distdeck:position', (event) => {
    const pos = event.detail;
    last = pos;
    showPosition();
    for (const button of buttons) {
      const current = button.dataset.section === pos.section;
      button.classList.toggle('current', current);
      if (current) {
        button.setAttribute('aria-current', 'true');
        const name = menu?.querySelector('.topbar-menu-label');
        if (name) name.textContent = button.textContent;
      } else button.removeAttribute('aria-current');
    }
  });
}
