/**
 * ?print-pdf: reveal.js lays out one page per slide and, with pdfSeparateFragments, one page
 * per fragment. Turning each data-step part into a fragment of the same index gives one page
 * per step of a stepped slide, without a print layout of our own.
 */
export function stepsToFragments(root = document) {
  for (const part of root.querySelectorAll('.reveal section[data-steps] [data-step]')) {
    const step = parseInt(part.dataset.step, 10);
    if (step > 0) {
      part.classList.add('fragment');
      part.dataset.fragmentIndex = String(step);
    }
  }
}
