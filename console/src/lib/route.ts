import { useEffect, useState } from 'preact/hooks';

/**
 * Hash routes (`#/explore?dataset=app&from=15m&to=now&q=…`): the server serves one page at `/`, and a
 * link with the view, dataset, query and time range can be shared. Never holds the key.
 */
export interface Route {
  view: string;
  params: Record<string, string>;
}

export function parseHash(hash: string): Route {
  const h = hash.replace(/^#\/?/, '');
  const [view, query = ''] = h.split('?', 2);
  const params: Record<string, string> = {};
  for (const [k, v] of new URLSearchParams(query)) params[k] = v;
  return { view: view || 'datasets', params };
}

export function formatHash(view: string, params: Record<string, string | undefined> = {}): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, v);
  const s = q.toString();
  return `#/${view}${s ? `?${s}` : ''}`;
}

export function navigate(view: string, params: Record<string, string | undefined> = {}, replace = false): void {
  const hash = formatHash(view, params);
  if (replace) history.replaceState(null, '', hash);
  else location.hash = hash;
  if (replace) window.dispatchEvent(new HashChangeEvent('hashchange'));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseHash(location.hash));
  useEffect(() => {
    const on = () => setRoute(parseHash(location.hash));
    window.addEventListener('hashchange', on);
    return () => window.removeEventListener('hashchange', on);
  }, []);
  return route;
}
