import { useMemo, useRef } from 'preact/hooks';
import type uPlotType from 'uplot';
import { Chart, themeColors, timeAxisValues, uPlot } from './Chart.tsx';

interface Props {
  /** Bucket starts (epoch seconds) and counts. */
  times: number[];
  counts: number[];
  bucketSeconds: number;
  /** Called with the dragged-over time range in epoch ms. */
  onZoom: (startMs: number, endMs: number) => void;
  theme: string;
  note?: string;
}

/** Hits over time as bars; dragging across it selects a time range to zoom into. */
export function Histogram({ times, counts, bucketSeconds, onZoom, theme, note }: Props) {
  const data = useMemo<uPlotType.AlignedData>(() => [times, counts], [times, counts]);
  // The chart is made once per shape; its drag hook calls the latest callback.
  const zoom = useRef(onZoom);
  zoom.current = onZoom;
  const total = counts.reduce((a, b) => a + b, 0);
  const options = (width: number): Omit<uPlotType.Options, 'width'> => {
    const c = themeColors();
    return {
      height: 140,
      legend: { show: false },
      cursor: { drag: { x: true, y: false, setScale: false }, points: { show: false } },
      select: { show: true, left: 0, top: 0, width: 0, height: 0 },
      scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(1, max) * 1.1] } },
      axes: [
        { stroke: c.text, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid }, values: timeAxisValues },
        { stroke: c.text, grid: { stroke: c.grid, width: 1 }, ticks: { stroke: c.grid }, size: 50 },
      ],
      series: [{}, { label: 'hits', fill: c.accent, stroke: c.accent, paths: uPlot.paths.bars!({ size: [0.8, 60], align: 1 }), points: { show: false } }],
      hooks: {
        setSelect: [
          (u) => {
            if (u.select.width < 3) return;
            const from = u.posToVal(u.select.left, 'x');
            const to = u.posToVal(u.select.left + u.select.width, 'x');
            u.setSelect({ left: 0, top: 0, width: 0, height: 0 }, false);
            zoom.current(Math.floor(from * 1000), Math.ceil(to * 1000));
          },
        ],
      },
      padding: [8, 20, 0, 0],
      ...(width < 500 ? { axes: [{ stroke: c.text, space: 80, values: timeAxisValues }, { stroke: c.text, size: 40 }] } : {}),
    };
  };
  return (
    <section class="histogram" aria-label="Hits over time">
      <div class="histogram-head">
        <span>
          <strong data-testid="hit-count">{total.toLocaleString('en-US')}</strong> hits · {bucketSeconds >= 60 ? `${bucketSeconds / 60} min` : `${bucketSeconds} s`} buckets
          {note ? ` · ${note}` : ''}
        </span>
        <span class="muted small">drag across the chart to zoom</span>
      </div>
      <Chart options={options} data={data} shapeKey={`${theme}:${bucketSeconds}`} label={`Histogram of ${total} hits`} testId="histogram" />
    </section>
  );
}
