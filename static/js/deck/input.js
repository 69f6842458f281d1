/**
 * Every way of moving through the deck goes through the steps: reveal.js's key bindings are
 * configured to call steps.next/prev, its on-screen arrows are intercepted before they act,
 * and its swipe handling is switched off on the slides (data-prevent-swipe) in favour of a
 * swipe that steps too.
 */
import { next, prev } from './steps.js';

/** reveal.js `keyboard` config: key code -> handler (overrides its defaults for these keys). */
export function keyBindings(reveal) {
  const forward = (event) => {
    if (reveal.isOverview()) return event.keyCode === 32 ? reveal.toggleOverview(false) : reveal.right();
    if (event.shiftKey && event.keyCode !== 32) return reveal.slide(reveal.getTotalSlides() - 1);
    if (event.shiftKey) return prev();
    return next({ skipSteps: event.altKey });
  };
  const backward = (event) => {
    if (reveal.isOverview()) return reveal.left();
    if (event.shiftKey) return reveal.slide(0);
    return prev({ skipSteps: event.altKey });
  };
  // → L Space PgDn N ↓ J forward; ← H PgUp P ↑ K back (reveal's linear-navigation keys).
  const bindings = {};
  for (const code of [39, 76, 32, 34, 78, 40, 74]) bindings[code] = forward;
  for (const code of [37, 72, 33, 80, 38, 75]) bindings[code] = backward;
  return bindings;
}

const SWIPE_PX = 40;

export function start(reveal) {
  const controls = reveal.getRevealElement().querySelector('.controls');
  // reveal's arrows act on touchstart and click (touchend on Android); capture all three on the
  // container, before reveal's listeners on the buttons: a tap steps once (touchstart, whose
  // preventDefault also stops the click that would follow), a mouse click steps once.
  const onArrow = (event) => {
    const button = event.target.closest('button');
    if (!button || reveal.isOverview()) return;
    const forward = button.matches('.navigate-right, .navigate-next, .navigate-down');
    if (!forward && !button.matches('.navigate-left, .navigate-prev, .navigate-up')) return;
    if (event.type !== 'touchend') (forward ? next : prev)();
    event.preventDefault();
    event.stopPropagation();
  };
  for (const type of ['touchstart', 'touchend', 'click']) {
    controls?.addEventListener(type, onArrow, { capture: true, passive: false });
  }

  const slides = reveal.getSlidesElement();
  slides.setAttribute('data-prevent-swipe', '');
  let start = null;
  slides.addEventListener('touchstart', (event) => {
    start = event.touches.length === 1 ? { x: event.touches[0].clientX, y: event.touches[0].clientY } : null;
  }, { passive: true });
  slides.addEventListener('touchend', (event) => {
    if (!start || event.changedTouches.length !== 1) return;
    const dx = event.changedTouches[0].clientX - start.x;
    const dy = event.changedTouches[0].clientY - start.y;
    start = null;
    if (Math.abs(dx) > SWIPE_PX && Math.abs(dx) > Math.abs(dy)) (dx < 0 ? next : prev)();
  });
}
