/** Typesets every .tex[data-tex] element with KaTeX (from npm, served from static/vendor). */
import katex from '../../vendor/katex/katex.mjs';

export function typeset(root = document) {
  for (const el of root.querySelectorAll('.tex[data-tex]')) {
    katex.render(el.dataset.tex, el, {
      displayMode: el.dataset.display === 'true',
      throwOnError: false, // a bad formula shows in red on its slide instead of stopping the deck
      output: 'htmlAndMathml', // MathML for screen readers, HTML for the eye
    });
  }
}
