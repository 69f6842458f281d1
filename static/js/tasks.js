/**
 * Long work cut into tasks. A task over 50 ms is a "long task" (W3C Long Tasks API; Lighthouse's Total
 * Blocking Time counts what each one runs past 50 ms): the page cannot answer a tap or a key until it
 * ends. Code that does two big things in a row (a library's start, then a first drawing) awaits
 * nextTask() between them, so that each is a task of its own and the page can answer in between.
 */

/** Resolves in a later task: scheduler.yield() where the browser has it (it resumes ahead of other tasks), else a 0 ms timer. */
export function nextTask() {
  if (window.scheduler?.yield) return window.scheduler.yield();
  return new Promise((resolve) => { window.setTimeout(resolve, 0); });
}
