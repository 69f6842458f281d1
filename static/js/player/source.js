/**
 * Where a player's frames come from: the server's Server-Sent Events stream.
 * EventSource reconnects by itself and sends Last-Event-ID, so the server resumes
 * after the last frame we got; a finished run is closed so it never re-opens.
 */

/** Params as a query string; a null default is left out so the server applies it (not the text "null"). */
export function toQuery(params) {
  return new URLSearchParams(Object.entries(params).filter(([, v]) => v != null).map(([k, v]) => [k, String(v)]));
}

export function streamRun(scenario, params, handlers) {
  const query = toQuery(params);
  const url = `/api/simulations/${encodeURIComponent(scenario)}/frames?${query}`;
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

/** A refused stream says why over plain HTTP (422 names the field and bound; 503 says busy). */
export async function whyRefused(scenario, params) {
  const query = toQuery(params);
  try {
    const response = await fetch(`/api/simulations/${encodeURIComponent(scenario)}/frames?${query}`,
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
  const response = await fetch(`/api/simulations/${encodeURIComponent(scenario)}`);
  if (!response.ok) throw new Error(`no scenario ${scenario}`);
  return response.json();
}
