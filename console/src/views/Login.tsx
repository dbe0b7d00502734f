import { useEffect, useState } from 'preact/hooks';
import { ApiError } from '../lib/api.ts';
import type { Theme } from '../lib/theme.ts';

interface Props {
  onSignIn: (key: string) => Promise<void>;
  theme: Theme;
  onToggleTheme: () => void;
}

export function Login({ onSignIn, theme, onToggleTheme }: Props) {
  const [key, setKey] = useState('');
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const [sso, setSso] = useState(false);

  // The single sign-on button only when the server has a provider configured (a public endpoint).
  useEffect(() => {
    fetch('/api/v1/o/config', { credentials: 'omit', cache: 'no-store' })
      .then((r) => (r.ok ? (r.json() as Promise<{ sso?: boolean }>) : { sso: false }))
      .then((c) => setSso(c.sso === true), () => setSso(false));
  }, []);
  // Back to where the user was (the view in the hash) once signed in.
  const ssoHref = `/api/v1/o/login?redirect=${encodeURIComponent(`/${location.hash}`)}`;

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError('');
    try {
      await onSignIn(key.trim());
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? 'That key is not valid.' : (err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="login" id="main">
      <form onSubmit={submit} class="card" aria-labelledby="login-title">
        <h1 id="login-title">Telemetry lakehouse</h1>
        {sso && (
          <>
            <a class="button sso" href={ssoHref} data-testid="sso-sign-in">
              Sign in with single sign-on
            </a>
            <p class="muted small or">or</p>
          </>
        )}
        <p class="muted">Sign in with an API key. It is kept in this browser tab only and sent as a header.</p>
        <label for="api-key">API key</label>
        <input id="api-key" type="password" autocomplete="current-password" required value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} autoFocus />
        {error && (
          <p class="error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" disabled={busy || !key.trim()}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        <p class="muted small">
          A server started without <code>P_API_KEYS</code> keeps its generated admin key in <code>data/api-key</code>.
        </p>
        <button type="button" class="link small" onClick={onToggleTheme}>
          {theme === 'dark' ? 'Light theme' : 'Dark theme'}
        </button>
      </form>
    </main>
  );
}
