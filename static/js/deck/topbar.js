/** The top bar: section names (click to jump) and "Slide n/N · Step k/K". */
import { goTo } from './steps.js';

export function formatPosition(pos) {
  const stepCount = Math.max(pos.stepCount, 1) + (pos.pending ? '+' : '');
  const step = pos.stepCount > 0 ? pos.step + 1 : 0;
  const waiting = pos.waiting ? ' · waiting…' : '';
  return `Slide ${pos.slideIndex + 1}/${pos.slideCount} · Step ${step}/${stepCount}${waiting}`;
}

export function start() {
  const label = document.getElementById('deck-position');
  const buttons = Array.from(document.querySelectorAll('.topbar [data-jump]'));
  for (const button of buttons) {
    button.addEventListener('click', () => {
      const slide = document.getElementById(button.dataset.jump);
      if (!slide) return;
      goTo(slide, 0);
      // Hand the keyboard back to the slides: a focused button would also take Space/Enter.
      document.getElementById('deck')?.focus({ preventScroll: true });
    });
  }
  document.addEventListener('distdeck:position', (event) => {
    const pos = event.detail;
    if (label) label.textContent = formatPosition(pos);
    for (const button of buttons) {
      const current = button.dataset.section === pos.section;
      button.classList.toggle('current', current);
      if (current) button.setAttribute('aria-current', 'true');
      else button.removeAttribute('aria-current');
    }
  });
}
