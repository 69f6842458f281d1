/** Screen-reader announcements of slide and step changes, through one polite live region. */

let lastSlide = null;
let lastStep = null;

export function announce(text) {
  const region = document.getElementById('deck-announcer');
  if (!region) return;
  // Clear first so repeating the same text is still announced.
  region.textContent = '';
  window.requestAnimationFrame(() => { region.textContent = text; });
}

function describe(pos) {
  if (pos.slide !== lastSlide) {
    const steps = pos.stepCount > 1 ? `, ${pos.stepCount} steps` : '';
    return `Slide ${pos.slideIndex + 1} of ${pos.slideCount}: ${pos.title}${steps}`;
  }
  if (pos.step !== lastStep) {
    const labels = Array.from(pos.slide.querySelectorAll(`[data-step="${pos.step}"][data-step-label]`))
      .map((el) => el.dataset.stepLabel);
    return [`Step ${pos.step + 1} of ${pos.stepCount}`, ...labels].join('. ');
  }
  if (pos.waiting) return 'Waiting for the next step of the simulation';
  return null;
}

export function start() {
  document.addEventListener('distdeck:position', (event) => {
    const text = describe(event.detail);
    lastSlide = event.detail.slide;
    lastStep = event.detail.step;
    if (text) announce(text);
  });
}

/** True when the visitor asked their system for less motion, and in print (end states only). */
export function prefersReducedMotion() {
  return document.documentElement.classList.contains('print-mode')
    || window.matchMedia('(prefers-reduced-motion: reduce)').matches;
}
