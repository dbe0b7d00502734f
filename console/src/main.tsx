import { render } from 'preact';
import { App } from './app.tsx';
import { initTheme } from './lib/theme.ts';
import './styles.css';

initTheme();
render(<App />, document.getElementById('app')!);
