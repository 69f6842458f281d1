/**
 * Typesets every .tex[data-tex] element with KaTeX (from npm, served from static/vendor). KaTeX
 * (600 KB) is fetched only by a page that has a formula: a widget page never loads it.
 */
export async function typeset(root = document) {
  const formulas = root.querySelectorAll('.tex[data-tex]');
  if (!formulas.length) return;
  const { default: katex } = await import('../../vendor/katex/katex.mjs');
  for (const el of formulas) {
    katex.render(el.dataset.tex, el, {
      displayMode: el.dataset.display === 'true',
      throwOnError: false, // a bad formula shows in red on its slide instead of stopping the deck
      output: 'htmlAndMathml', // MathML for screen readers, HTML for the eye
    });
  }
}
