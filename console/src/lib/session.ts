/** The API key lives in sessionStorage only: gone when the tab closes, never in a URL, cookie or log. */
const KEY = 'lakehouse.apiKey';

export const session = {
  get: (): string | undefined => sessionStorage.getItem(KEY) ?? undefined,
  set: (key: string): void => sessionStorage.setItem(KEY, key),
  clear: (): void => sessionStorage.removeItem(KEY),
};
