/**
 * Typesets .tex[data-tex] elements with KaTeX (from npm, served from static/vendor). KaTeX
 * (600 KB) is fetched only by a page that has a formula: a widget page never loads it.
 *
 * A typeset formula is some hundred elements (the deck's formulas were 9,500 of its 14,000), so the
 * deck typesets a slide's formulas when the slide comes near (typesetNear), not all at the start:
 * print and the overview, which show every slide, typeset them all (typeset()).
 */

// Slides this far from the current one (or nearer) are typeset: the next press never shows raw TeX.
export const NEAR_SLIDES = 2;

export async function typeset(root = document) {
  const formulas = Array.from(root.querySelectorAll('.tex[data-tex]')).filter((el) => !el.dataset.typeset);
  if (!formulas.length) return;
  const { default: katex } = await import('../../vendor/katex/katex.mjs');
  for (const el of formulas) {
    if (el.dataset.typeset) continue; // typeset meanwhile by a call that loaded KaTeX first
    katex.render(el.dataset.tex, el, {
      displayMode: el.dataset.display === 'true',
      throwOnError: false, // a bad formula shows in red on its slide instead of stopping the deck
      output: 'htmlAndMathml', // MathML for screen readers, HTML for the eye
    });
    el.dataset.typeset = 'true';
  }
}

/** Typesets `slide` first, then the slides within NEAR_SLIDES of it (deck order). */
export async function typesetNear(slide) {
  if (!slide) return;
  const slides = Array.from(document.querySelectorAll('.reveal .slides > section'));
  const at = slides.indexOf(slide);
  await typeset(slide);
  await Promise.all(slides.slice(Math.max(0, at - NEAR_SLIDES), at + NEAR_SLIDES + 1).map((near) => typeset(near)));
}
