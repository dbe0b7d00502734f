import { useEffect, useState } from 'preact/hooks';
import { useSession, type DatasetEntry } from '../lib/store.ts';
import { datasetDetails, type DatasetDetails } from '../lib/datasetInfo.ts';
import { formatBytes, formatCount } from '../lib/format.ts';
import { formatTime } from '../lib/time.ts';
import { formatHash, navigate } from '../lib/route.ts';
import { Snippets } from '../components/Snippets.tsx';
import { CreateDataset } from './CreateDataset.tsx';
import { DatasetPanel } from './DatasetPanel.tsx';

const when = (ms?: number) => (ms === undefined ? '—' : formatTime(ms));

export function Datasets({ params }: { params: Record<string, string> }) {
  const s = useSession();
  const [list, setList] = useState<DatasetEntry[]>(s.datasets);
  const [details, setDetails] = useState<Record<string, DatasetDetails>>({});
  const [error, setError] = useState('');
  const [version, setVersion] = useState(0);

  useEffect(() => {
    let live = true;
    s.refreshDatasets().then(
      (l) => {
        if (!live) return;
        setList(l);
        setError('');
        // Details one dataset at a time: a long list must not flood the server.
        (async () => {
          for (const d of l) {
            const det = await datasetDetails(s, d.name).catch(() => ({}) as DatasetDetails);
            if (!live) return;
            setDetails((prev) => ({ ...prev, [d.name]: det }));
          }
        })();
      },
      (e) => live && setError((e as Error).message),
    );
    return () => {
      live = false;
    };
  }, [version]);

  const reload = () => setVersion((v) => v + 1);
  const selected = params.dataset && list.some((d) => d.name === params.dataset) ? params.dataset : undefined;

  if (!s.caps.read) {
    return (
      <section class="page">
        <h1>Send data</h1>
        <p>This key may ingest{s.caps.create ? ' and create datasets' : ''} but not read. Here is how to send data to this server:</p>
        {s.caps.create && <CreateDataset onCreated={reload} />}
        <Snippets />
      </section>
    );
  }

  return (
    <section class="page">
      <div class="page-head">
        <h1>Datasets</h1>
        <span class="spacer" />
        <button class="secondary" onClick={reload}>
          Refresh
        </button>
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {s.caps.create && <CreateDataset onCreated={(name) => (reload(), navigate('datasets', { dataset: name }))} />}
      {list.length === 0 && !error ? (
        <div class="empty" data-testid="empty-datasets">
          <h2>No datasets yet</h2>
          <p>Send some events and a dataset appears here. For example:</p>
          <Snippets />
        </div>
      ) : (
        <DatasetTable list={list} details={details} selected={selected} />
      )}
      {selected && <DatasetPanel key={`${selected}:${version}`} name={selected} kind={list.find((d) => d.name === selected)!.kind} details={details[selected]} onChanged={reload} />}
    </section>
  );
}

function DatasetTable({ list, details, selected }: { list: DatasetEntry[]; details: Record<string, DatasetDetails>; selected?: string }) {
  return (
    <div class="table-wrap">
      <table class="datasets" data-testid="datasets-table">
        <caption class="sr-only">Datasets</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Kind</th>
            <th scope="col" class="num">Events</th>
            <th scope="col" class="num">Raw</th>
            <th scope="col" class="num">Stored</th>
            <th scope="col" class="num">Files</th>
            <th scope="col">First event (UTC)</th>
            <th scope="col">Last event (UTC)</th>
            <th scope="col">Retention</th>
          </tr>
        </thead>
        <tbody>
          {list.map((d) => {
            const det = details[d.name];
            return (
              <tr key={d.name} class={selected === d.name ? 'selected' : ''} data-testid={`dataset-row-${d.name}`}>
                <th scope="row">
                  <a href={formatHash('datasets', { dataset: d.name })}>{d.name}</a>
                </th>
                <td>
                  <span class={`badge kind-${d.kind}`}>{d.kind}</span>
                </td>
                <td class="num" data-testid="event-count">{formatCount(det?.count)}</td>
                <td class="num">{formatBytes(det?.rawBytes)}</td>
                <td class="num">{formatBytes(det?.storedBytes)}</td>
                <td class="num">{formatCount(det?.files)}</td>
                <td data-testid="first-event">{when(det?.firstMs)}</td>
                <td data-testid="last-event">{when(det?.lastMs)}</td>
                <td>{det?.retention ?? '—'}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}
