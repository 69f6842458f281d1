/**
 * Display names of the estimator's presets (simulations/estimate: its GPU and model catalogs), for every
 * control and view that offers or names them: ids stay in the requests, names on screen.
 */
export const GPU_NAMES = { 'h100-80gb': 'H100', 'a100-80gb': 'A100', h200: 'H200', b200: 'B200' };
export const MODEL_NAMES = {
  'llama3-70b': 'Llama 3 70B', 'llama3-8b': 'Llama 3 8B', 'llama3-405b': 'Llama 3 405B', 'gpt3-175b': 'GPT-3 175B',
  'mixtral-8x7b': 'Mixtral 8x7B',
};
