/** Light or dark: the user's choice (kept in localStorage), else the system's. */
const KEY = 'lakehouse.theme';

export type Theme = 'light' | 'dark';

export function currentTheme(): Theme {
  const saved = localStorage.getItem(KEY);
  if (saved === 'light' || saved === 'dark') return saved;
  return matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light';
}

export function applyTheme(t: Theme, save = false): void {
  document.documentElement.dataset.theme = t;
  if (save) localStorage.setItem(KEY, t);
}

export function initTheme(): void {
  applyTheme(currentTheme());
}
