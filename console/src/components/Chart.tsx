import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';

/** Colours of the current theme, read from CSS variables when a chart is made. */
export function themeColors() {
  const s = getComputedStyle(document.documentElement);
  const v = (name: string) => s.getPropertyValue(name).trim();
  return { text: v('--fg-muted'), grid: v('--border'), accent: v('--accent'), palette: v('--palette').split(/\s+/).filter(Boolean) };
}

/**
 * Time axis labels in UTC and 24-hour form: `14:05`, with seconds when the ticks are closer than a
 * minute, and the date when they are a day or more apart.
 */
export function timeAxisValues(_u: uPlot, splits: number[], _axis: number, _space: number, incr: number): string[] {
  return splits.map((s) => {
    const iso = new Date(s * 1000).toISOString();
    if (incr >= 86400) return iso.slice(5, 10);
    if (incr < 60) return iso.slice(11, 19);
    return iso.slice(11, 16);
  });
}

/** Dates for uPlot's legend and cursor in UTC, like every other time in the console. */
const utc = (ts: number) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC');

interface Props {
  /** Builds the options for a width (height is fixed). Called again when the theme changes. */
  options: (width: number) => Omit<uPlot.Options, 'width'>;
  data: uPlot.AlignedData;
  /** Re-create the chart when this changes (series set, theme). */
  shapeKey: string;
  label: string;
  testId?: string;
  /** The chart once made (and null when it goes), for callers that drive it (a legend). */
  onReady?: (u: uPlot | null) => void;
}

export function Chart({ options, data, shapeKey, label, testId, onReady }: Props) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);

  useEffect(() => {
    const el = host.current!;
    const width = Math.max(200, el.clientWidth);
    const u = new uPlot({ ...options(width), width, tzDate: utc }, data, el);
    plot.current = u;
    onReady?.(u);
    const ro = new ResizeObserver(() => {
      const w = Math.max(200, el.clientWidth);
      if (w !== u.width) u.setSize({ width: w, height: u.height });
    });
    ro.observe(el);
    return () => {
      ro.disconnect();
      u.destroy();
      plot.current = null;
      onReady?.(null);
    };
  }, [shapeKey]);

  useEffect(() => {
    plot.current?.setData(data);
  }, [data]);

  return <div class="chart" ref={host} role="img" aria-label={label} data-testid={testId} />;
}

export { uPlot };
