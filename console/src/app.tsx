import { useEffect, useState } from 'preact/hooks';
import { ApiError } from './lib/api.ts';
import { session as keyStore } from './lib/session.ts';
import { Session, SessionContext } from './lib/store.ts';
import { formatHash, useRoute } from './lib/route.ts';
import { applyTheme, currentTheme, type Theme } from './lib/theme.ts';
import { Login } from './views/Login.tsx';
import { Datasets } from './views/Datasets.tsx';
import { Explore } from './views/Explore.tsx';
import { Tail } from './views/Tail.tsx';
import { Traces } from './views/Traces.tsx';
import { Metrics } from './views/Metrics.tsx';

const VIEWS = [
  { id: 'datasets', label: 'Datasets', needsRead: false },
  { id: 'explore', label: 'Explore', needsRead: true },
  { id: 'tail', label: 'Live tail', needsRead: true },
  { id: 'traces', label: 'Traces', needsRead: true },
  { id: 'metrics', label: 'Metrics', needsRead: true },
];

export function App() {
  const [session, setSession] = useState<Session | null>(null);
  const [restoring, setRestoring] = useState(true);
  const [theme, setTheme] = useState<Theme>(currentTheme());
  const route = useRoute();

  // A key kept in this tab's session signs in again after a reload; without one, the session cookie of a
  // single sign-on does (401 when there is none: the sign-in page).
  useEffect(() => {
    const key = keyStore.get();
    Session.signIn(key)
      .then(setSession, (e) => {
        if (key && e instanceof ApiError && e.status === 401) keyStore.clear();
      })
      .finally(() => setRestoring(false));
  }, []);

  const signIn = async (key: string) => {
    const s = await Session.signIn(key);
    keyStore.set(key);
    setSession(s);
  };
  const signOut = async () => {
    // A single sign-on session ends on the server (POST, from this origin); a key is only forgotten here.
    if (session?.api.bySession) await fetch('/api/v1/o/logout', { method: 'POST', credentials: 'same-origin', headers: { Accept: 'application/json' } }).catch(() => undefined);
    keyStore.clear();
    setSession(null);
    location.hash = '';
  };
  const toggleTheme = () => {
    const t = theme === 'dark' ? 'light' : 'dark';
    applyTheme(t, true);
    setTheme(t);
  };

  if (restoring) return <p class="center muted">Signing in…</p>;
  if (!session) return <Login onSignIn={signIn} theme={theme} onToggleTheme={toggleTheme} />;

  const views = VIEWS.filter((v) => session.caps.read || !v.needsRead);
  const active = views.some((v) => v.id === route.view) ? route.view : 'datasets';
  return (
    <SessionContext.Provider value={session}>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), document.getElementById('main')?.focus())}>
        Skip to content
      </a>
      <header class="topbar">
        <span class="brand" aria-hidden="true">
          ▮▮▮
        </span>
        <nav aria-label="Main">
          {views.map((v) => (
            <a key={v.id} href={formatHash(v.id, route.params.dataset ? { dataset: route.params.dataset } : {})} aria-current={active === v.id ? 'page' : undefined}>
              {v.label}
            </a>
          ))}
        </nav>
        <span class="spacer" />
        <span class="who muted small" data-testid="whoami" title={session.who.user ? 'Signed in through single sign-on' : 'Signed in with an API key'}>
          {session.who.user ? `${session.who.user} · ${session.who.roles?.join(', ') || 'no role'}` : `API key · ${session.who.role}`}
        </span>
        <button class="icon" onClick={toggleTheme} aria-label={`Switch to ${theme === 'dark' ? 'light' : 'dark'} theme`} title="Theme">
          {theme === 'dark' ? '☀' : '☾'}
        </button>
        <button class="secondary" onClick={() => void signOut()} data-testid="sign-out">
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {active === 'datasets' && <Datasets params={route.params} />}
        {active === 'explore' && <Explore params={route.params} theme={theme} />}
        {active === 'tail' && <Tail params={route.params} />}
        {active === 'traces' && <Traces params={route.params} />}
        {active === 'metrics' && <Metrics params={route.params} theme={theme} />}
      </main>
    </SessionContext.Provider>
  );
}
