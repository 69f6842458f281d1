/**
 * A static export has no server. Loaded first on its pages (in the head, before any slide's own
 * script), this answers the API calls that slides' scripts make with fetch, from what
 * `distdeck export` saved: the scenario catalog, and the recorded runs replayed as the
 * Server-Sent Events text the server would have sent. Anything else under /api/ (a run that was
 * not recorded) gets a 503 that says it needs the live server, without a request leaving the
 * page. (The memory calculator computes in the page and asks nothing.)
 *
 * A widget page (embed/<scenario>/) also takes its parameters from the query string, as the
 * server's /embed/<scenario>?... does: embed/ddp/?world_size=2&controls=world_size.
 */
import { NEEDS_SERVER, loadCatalog, recordedRun, siteRoot } from './player/source.js';

const realFetch = window.fetch.bind(window);

function json(body, status = 200) {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
}

/** Query values are text; type them like the scenario's defaults. */
function typed(query, defaults) {
  const params = {};
  for (const [key, raw] of query) {
    const like = defaults[key];
    if (typeof like === 'number') params[key] = Number(raw);
    else if (typeof like === 'boolean') params[key] = raw === 'true';
    else params[key] = raw;
  }
  return params;
}

function sse(run) {
  const events = [['meta', run.meta], ...run.frames.map((f) => ['frame', f]), ['summary', run.summary],
    ['done', { frames: run.frames.length }]];
  return events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join('');
}

/** `path` is relative to the API (e.g. "simulations/ddp/frames"). */
async function answer(path, query) {
  const parts = path.split('/').map(decodeURIComponent);
  if (parts[0] === 'simulations') {
    const catalog = await loadCatalog();
    if (parts.length === 1) return json(catalog);
    const info = catalog.find((s) => s.name === parts[1]);
    if (!info) return json({ detail: `no scenario named ${parts[1]}` }, 404);
    if (parts.length === 2) return json(info);
    if (parts.length === 3 && parts[2] === 'frames') {
      const run = await recordedRun(info.name, typed(query, info.defaults));
      if (!run) return json({ detail: NEEDS_SERVER }, 503);
      return new Response(sse(run), { headers: { 'Content-Type': 'text/event-stream' } });
    }
  }
  // Shaped like a 422's detail, so widgets that name the failing field show the sentence.
  return json({ detail: [{ loc: ['query', 'server'], msg: 'this needs the live server; this copy of the deck has recorded runs only' }] }, 503);
}

window.fetch = async (input, init) => {
  const url = new URL(typeof input === 'string' || input instanceof URL ? input : input.url, document.baseURI);
  if (url.origin === siteRoot.origin) {
    // Scripts written for the server ask for /api/...; relative ones for <root>api/...
    const prefix = [siteRoot.pathname + 'api/', '/api/'].find((p) => url.pathname.startsWith(p));
    if (prefix && !url.pathname.endsWith('.json')) return answer(url.pathname.slice(prefix.length), url.searchParams);
  }
  return realFetch(input, init);
};

function widgetQuery() {
  let config;
  try { config = JSON.parse(document.getElementById('deck-config')?.textContent ?? '{}'); } catch { return; }
  const sim = document.querySelector('.live-sim');
  if (!config.widget || !sim || !window.location.search) return;
  const query = new URLSearchParams(window.location.search);
  const params = JSON.parse(sim.dataset.params || '{}');
  const list = (text) => text.split(',').map((s) => s.trim()).filter(Boolean);
  for (const [key, raw] of query) {
    if (key === 'controls') sim.dataset.controls = JSON.stringify(list(raw));
    else if (key === 'views') sim.dataset.views = JSON.stringify(list(raw));
    else if (key !== 'embed') {
      params[key] = raw === 'true' ? true : raw === 'false' ? false : raw !== '' && !Number.isNaN(Number(raw)) ? Number(raw) : raw;
    }
  }
  sim.dataset.params = JSON.stringify(params);
}

// Module scripts run after the document is parsed and in order: this one before the player's.
widgetQuery();
