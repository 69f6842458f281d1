/**
 * Where a player's frames come from.
 *
 * On the server: its Server-Sent Events stream. EventSource reconnects by itself and sends
 * Last-Event-ID, so the server resumes after the last frame we got; a finished run is closed
 * so it never re-opens.
 *
 * In a static export (the page config says `staticSite`): the run files `distdeck export`
 * recorded, listed in runs/index.json, replayed through the same handlers. A variant that was
 * not recorded says so plainly (handlers.unavailable) instead of failing.
 *
 * URLs are built from the page's root (config `root`: "/" on the server, relative in an export),
 * so the same code works from any folder of any static host.
 */

function readConfig() {
  try { return JSON.parse(document.getElementById('deck-config')?.textContent ?? '{}'); } catch { return {}; }
}

const config = readConfig();
/** The site's root as an absolute URL. */
export const siteRoot = new URL(config.root ?? '/', document.baseURI);
/** True in a static export: no server, runs come from recorded files. */
export const staticSite = Boolean(config.staticSite);
export const NEEDS_SERVER = 'this variant needs the live server: run `make run`';
// The browser's own fetch, kept before static-site.js answers the pages' API calls.
const realFetch = window.fetch.bind(window);

/** Params as a query string; a null default is left out so the server applies it (not the text "null"). */
export function toQuery(params) {
  return new URLSearchParams(Object.entries(params).filter(([, v]) => v != null).map(([k, v]) => [k, String(v)]));
}

function apiUrl(path) {
  return new URL(`api/${path}`, siteRoot).href;
}

function streamLive(scenario, params, handlers) {
  return followEvents(apiUrl(`simulations/${encodeURIComponent(scenario)}/frames?${toQuery(params)}`), handlers);
}

/** A run recorded under torchrun and served by `distdeck serve --runs DIR`, replayed over the same SSE. */
export function streamRecordedRun(runId, handlers) {
  return followEvents(apiUrl(`runs/${encodeURIComponent(runId)}/frames`), handlers);
}

function followEvents(url, handlers) {
  const source = new EventSource(url);
  const parse = (event) => JSON.parse(event.data);
  source.addEventListener('meta', (e) => handlers.meta(parse(e)));
  source.addEventListener('frame', (e) => handlers.frame(parse(e)));
  source.addEventListener('summary', (e) => handlers.summary(parse(e)));
  source.addEventListener('done', () => { source.close(); handlers.done(); });
  source.addEventListener('error', (e) => {
    if (e.data !== undefined) { // the server's own `error` event: the run failed
      source.close();
      handlers.error(parse(e).message);
    } else if (source.readyState === EventSource.CLOSED) { // refused (422, 503): no retry
      handlers.error(null);
    } // else: the connection dropped and EventSource is reconnecting with Last-Event-ID
  });
  return { close: () => source.close() };
}

// -- the static export's recorded runs ------------------------------------------------------------

const loaded = new Map();

async function fetchJson(path) {
  const response = await realFetch(new URL(path, siteRoot).href);
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.json();
}

function once(path) {
  if (!loaded.has(path)) {
    const promise = fetchJson(path);
    promise.then((value) => { promise.value = value; }, () => loaded.delete(path));
    loaded.set(path, promise);
  }
  return loaded.get(path);
}

/** The scenario catalog (what GET /api/simulations answers), saved by the export. */
export const loadCatalog = () => once('api/simulations.json');
/** runs/index.json: every recorded run's scenario, params and file. */
export const loadIndex = () => once('runs/index.json');

function same(a, b) {
  if (typeof a === 'number' && typeof b === 'number') return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a));
  return a === b || (a == null && b == null);
}

function matches(candidate, wanted) {
  const keys = new Set([...Object.keys(candidate), ...Object.keys(wanted)]);
  for (const key of keys) if (!same(candidate[key], wanted[key])) return false;
  return true;
}

/** The recorded run for these params (over the scenario's defaults), or undefined. */
export function findRecorded(index, scenario, params, defaults) {
  const wanted = { ...defaults, ...params };
  return index.runs.find((entry) => entry.scenario === scenario
    && [entry.params, ...(entry.requests ?? [])].some((candidate) => matches(candidate, wanted)));
}

/**
 * In a static export: the recorded values of control `name` with every other param as now
 * (so the control row offers only what was recorded); null on the server (anything goes).
 */
export function recordedChoices(scenario, params, name) {
  if (!staticSite) return null;
  const catalog = loadCatalog().value;
  const index = loadIndex().value;
  const info = catalog?.find((s) => s.name === scenario);
  if (!info || !index) return null;
  const wanted = { ...info.defaults, ...params };
  const values = [];
  for (const entry of index.runs) {
    if (entry.scenario !== scenario) continue;
    for (const candidate of [entry.params, ...(entry.requests ?? [])]) {
      if (!matches({ ...candidate, [name]: wanted[name] }, wanted)) continue;
      if (!values.some((v) => same(v, candidate[name]))) values.push(candidate[name]);
    }
  }
  if (!values.some((v) => same(v, wanted[name]))) values.push(wanted[name]);
  return values.sort((a, b) => (typeof a === 'number' && typeof b === 'number' ? a - b : 0));
}

/** A recorded run file (meta, frames, summary) for these params, or null when it was not recorded. */
export async function recordedRun(scenario, params) {
  const [catalog, index] = await Promise.all([loadCatalog(), loadIndex()]);
  const info = catalog.find((s) => s.name === scenario);
  if (!info) throw new Error(`no scenario named ${scenario}`);
  const entry = findRecorded(index, scenario, params, info.defaults);
  if (!entry) return null;
  const run = await fetchJson(entry.file);
  run.meta.source = 'recorded';
  return run;
}

function replayRecorded(scenario, params, handlers) {
  let closed = false;
  (async () => {
    let run;
    try {
      run = await recordedRun(scenario, params);
    } catch (err) {
      if (!closed) handlers.error(`the recorded run could not be loaded (${err.message})`);
      return;
    }
    if (closed) return;
    if (!run) {
      (handlers.unavailable ?? handlers.error)(NEEDS_SERVER);
      return;
    }
    handlers.meta(run.meta);
    for (const frame of run.frames) handlers.frame(frame);
    handlers.summary(run.summary);
    handlers.done();
  })();
  return { close: () => { closed = true; } };
}

// -- what the player calls -------------------------------------------------------------------------

export function streamRun(scenario, params, handlers) {
  return staticSite ? replayRecorded(scenario, params, handlers) : streamLive(scenario, params, handlers);
}

/** A refused stream says why over plain HTTP (422 names the field and bound; 503 says busy). */
export async function whyRefused(scenario, params) {
  if (staticSite) return NEEDS_SERVER;
  const query = toQuery(params);
  try {
    const response = await fetch(apiUrl(`simulations/${encodeURIComponent(scenario)}/frames?${query}`),
      { headers: { Accept: 'application/json' } });
    if (response.ok) { response.body?.cancel(); return 'the connection to the server was lost'; }
    const body = await response.json().catch(() => ({}));
    if (Array.isArray(body.detail)) {
      return body.detail.map((d) => `${d.loc?.slice(-1)[0] ?? 'params'}: ${d.msg}`).join('; ');
    }
    return body.detail ?? `HTTP ${response.status}`;
  } catch {
    return 'the server cannot be reached';
  }
}

export async function describeScenario(scenario) {
  if (staticSite) {
    const [catalog] = await Promise.all([loadCatalog(), loadIndex()]);
    const info = catalog.find((s) => s.name === scenario);
    if (!info) throw new Error(`no scenario ${scenario}`);
    return info;
  }
  const response = await fetch(apiUrl(`simulations/${encodeURIComponent(scenario)}`));
  if (!response.ok) throw new Error(`no scenario ${scenario}`);
  return response.json();
}
