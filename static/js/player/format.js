/** Number formatting shared by the player's views: bytes, seconds, values. */

export function bytes(n) {
  if (n == null || Number.isNaN(n)) return '–';
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i += 1; }
  return `${i === 0 ? v : v.toFixed(v < 10 ? 2 : v < 100 ? 1 : 0)} ${units[i]}`;
}

export function ms(seconds) {
  if (seconds == null) return '–';
  const v = seconds * 1000;
  return `${v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)} ms`;
}

/**
 * An integer below 1e12 as en-US writes it, digits grouped by three (1,024), by plain string work: not
 * toLocaleString, which builds a formatter a call (the player's costliest function on a phone's first
 * frame, drawing hundreds of values), nor one Intl.NumberFormat kept, whose construction loads the
 * locale's data (205 ms at Chrome's 4x CPU throttling, Lighthouse's mobile preset; measured here), in
 * the widget's first long task.
 */
function grouped(n) {
  return `${n < 0 ? '-' : ''}${String(Math.abs(n)).replace(/\B(?=(\d{3})+$)/g, ',')}`;
}

export function value(x) {
  if (x == null) return '–';
  if (typeof x !== 'number') return String(x);
  if (x === 0) return '0';
  if (Number.isInteger(x) && Math.abs(x) < 1e12) return grouped(x);
  const a = Math.abs(x);
  return a >= 1e4 || a < 1e-3 ? x.toExponential(2) : x.toFixed(a < 1 ? 3 : 2);
}

/** A count and its noun, agreeing in number: "1 rank", "4 ranks", "1,024 GPUs" (`many` for an irregular plural). */
export function counted(n, noun, many = `${noun}s`) {
  return `${value(n)} ${n === 1 ? noun : many}`;
}

/** A measured value from a check: numbers, lists of numbers, or text. */
export function measured(x) {
  if (Array.isArray(x)) return `[${x.slice(0, 8).map(value).join(', ')}${x.length > 8 ? ', …' : ''}]`;
  if (x && typeof x === 'object') return Object.entries(x).map(([k, v]) => `${k} ${measured(v)}`).join(', ');
  return value(x);
}

/** Colour of a tensor role, from the deck's CSS variables (so views and legends agree). */
export const ROLE_COLORS = {
  parameters: 'var(--role-params, #5cc8ff)',
  gradients: 'var(--role-grads, #7ee07e)',
  optimizer: 'var(--role-optimizer, #ffb454)',
  activations: 'var(--role-activations, #c792ea)',
  batch: 'var(--role-batch, #9aa3b2)',
  buffer: 'var(--role-buffer, #ff8fa3)',
  gathered: 'var(--role-buffer, #ff8fa3)',
};

export function roleColor(role) {
  return ROLE_COLORS[role] ?? 'var(--fg-muted, #9aa3b2)';
}
