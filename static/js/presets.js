/**
 * The estimator's GPUs and model presets with what screens call them, for every control and view that offers or
 * names them: ids stay in the requests, names on screen. One source: the server's catalogs (simulations.hardware,
 * simulations.estimate.models), which every page carries as JSON (app/content/markup.estimator_presets, base.html.j2),
 * so a GPU added to the catalog is offered here too.
 */
const element = document.getElementById('estimator-presets');
if (!element) throw new Error('presets.js: the page carries no #estimator-presets (app/templates/base.html.j2)');
const presets = JSON.parse(element.textContent);

export const GPU_NAMES = Object.fromEntries(presets.gpus);
export const MODEL_NAMES = Object.fromEntries(presets.models);

/** "H100s", but "A100 40 GB GPUs" and "H100 500 W GPUs": a name that ends in a unit takes GPUs for its plural. */
export function gpuPlural(id, n = 2) {
  const name = GPU_NAMES[id] ?? id;
  if (n === 1) return name;
  return /\b(GB|W)$/.test(name) ? `${name} GPUs` : `${name}s`;
}
