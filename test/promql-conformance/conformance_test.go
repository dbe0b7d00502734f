// Package conformance runs Prometheus' own PromQL test files (promql/promqltest/testdata/*.test of the
// Prometheus module this project's engine is built from) against the service over HTTP.
//
// promqltest parses each file and checks each `eval` exactly as it checks Prometheus; the engine it is
// given here is remote: before a query, the data the file's `load` commands put into promqltest's local
// storage is sent to the service by remote write (protobuf + snappy) into a fresh dataset (once per
// distinct data set), and the query is asked over /prometheus/{dataset}/api/v1/query or query_range.
// The answer's JSON is turned back into the engine's values, warnings and errors for the comparison.
//
// Environment: LAKEHOUSE_URL (the service), LAKEHOUSE_KEY (an admin key). Each eval is a subtest named
// testdata/<file>/line_<n>/…, so `go test -v` prints a PASS or FAIL line per evaluation.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/gogo/protobuf/proto"
	"github.com/golang/snappy"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/stats"
)

func TestConformance(t *testing.T) {
	base := os.Getenv("LAKEHOUSE_URL")
	key := os.Getenv("LAKEHOUSE_KEY")
	if base == "" || key == "" {
		t.Fatal("set LAKEHOUSE_URL and LAKEHOUSE_KEY")
	}
	e := &remoteEngine{base: base, key: key, client: &http.Client{Timeout: 2 * time.Minute}, run: strconv.FormatInt(time.Now().UnixNano()%1e9, 36)}
	promqltest.RunBuiltinTests(t, e)
}

type remoteEngine struct {
	base, key, run string
	client         *http.Client
	lastHash       uint64
	dataset        string
	n              int
}

func (e *remoteEngine) NewInstantQuery(ctx context.Context, q storage.Queryable, _ promql.QueryOpts, qs string, ts time.Time) (promql.Query, error) {
	ds, err := e.sync(ctx, q)
	if err != nil {
		return nil, err
	}
	form := url.Values{"query": {qs}, "time": {formatTime(ts)}}
	return &remoteQuery{e: e, path: "/prometheus/" + ds + "/api/v1/query", form: form, expr: qs}, nil
}

func (e *remoteEngine) NewRangeQuery(ctx context.Context, q storage.Queryable, _ promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (promql.Query, error) {
	ds, err := e.sync(ctx, q)
	if err != nil {
		return nil, err
	}
	form := url.Values{"query": {qs}, "start": {formatTime(start)}, "end": {formatTime(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	return &remoteQuery{e: e, path: "/prometheus/" + ds + "/api/v1/query_range", form: form, expr: qs}, nil
}

func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', -1, 64)
}

// sync makes a dataset of the service hold exactly what the local storage holds: the previous one if
// the data did not change, else a fresh one filled by remote write.
func (e *remoteEngine) sync(ctx context.Context, q storage.Queryable) (string, error) {
	querier, err := q.Querier(math.MinInt64, math.MaxInt64)
	if err != nil {
		return "", err
	}
	defer querier.Close()
	set := querier.Select(ctx, true, nil, labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".*"))
	var series []prompb.TimeSeries
	h := fnv.New64a()
	var it chunkenc.Iterator
	for set.Next() {
		s := set.At()
		ts := prompb.TimeSeries{Labels: prompb.FromLabels(s.Labels(), nil)}
		h.Write([]byte(s.Labels().String()))
		it = s.Iterator(it)
		for vt := it.Next(); vt != chunkenc.ValNone; vt = it.Next() {
			switch vt {
			case chunkenc.ValFloat:
				t, v := it.At()
				ts.Samples = append(ts.Samples, prompb.Sample{Timestamp: t, Value: v})
				fmt.Fprintf(h, "%d:%x;", t, math.Float64bits(v))
			case chunkenc.ValHistogram:
				t, hist := it.AtHistogram(nil)
				ts.Histograms = append(ts.Histograms, prompb.FromIntHistogram(t, hist))
				fmt.Fprintf(h, "%d:%s;", t, hist.String())
			case chunkenc.ValFloatHistogram:
				t, hist := it.AtFloatHistogram(nil)
				ts.Histograms = append(ts.Histograms, prompb.FromFloatHistogram(t, hist))
				fmt.Fprintf(h, "%d:%s;", t, hist.String())
			}
		}
		series = append(series, ts)
	}
	if err := set.Err(); err != nil {
		return "", err
	}
	sum := h.Sum64()
	if e.dataset != "" && sum == e.lastHash {
		return e.dataset, nil
	}
	e.n++
	ds := fmt.Sprintf("conformance-%s-%d", e.run, e.n)
	if err := e.create(ds); err != nil {
		return "", err
	}
	// Batches of a few thousand samples, as Prometheus' own sender does.
	var batch []prompb.TimeSeries
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := e.write(ds, batch)
		batch, size = nil, 0
		return err
	}
	for _, s := range series {
		for len(s.Samples) > 5000 {
			part := s
			part.Samples = s.Samples[:5000]
			part.Histograms = nil
			if err := e.write(ds, []prompb.TimeSeries{part}); err != nil {
				return "", err
			}
			s.Samples = s.Samples[5000:]
		}
		batch = append(batch, s)
		size += len(s.Samples) + len(s.Histograms)
		if size >= 5000 {
			if err := flush(); err != nil {
				return "", err
			}
		}
	}
	if err := flush(); err != nil {
		return "", err
	}
	e.dataset, e.lastHash = ds, sum
	return ds, nil
}

func (e *remoteEngine) do(req *http.Request) ([]byte, int, error) {
	req.Header.Set("X-API-Key", e.key)
	res, err := e.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return b, res.StatusCode, err
}

func (e *remoteEngine) create(ds string) error {
	req, _ := http.NewRequest(http.MethodPut, e.base+"/api/v1/logstream/"+ds, nil)
	req.Header.Set("X-P-Log-Source", "otel-metrics")
	b, status, err := e.do(req)
	if err != nil {
		return err
	}
	if status >= 300 {
		return fmt.Errorf("creating dataset %s: %d %s", ds, status, b)
	}
	return nil
}

func (e *remoteEngine) write(ds string, series []prompb.TimeSeries) error {
	raw, err := proto.Marshal(&prompb.WriteRequest{Timeseries: series})
	if err != nil {
		return err
	}
	req, _ := http.NewRequest(http.MethodPost, e.base+"/v1/prometheus/write?stream="+url.QueryEscape(ds), bytes.NewReader(snappy.Encode(nil, raw)))
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	b, status, err := e.do(req)
	if err != nil {
		return err
	}
	if status != http.StatusOK && status != http.StatusNoContent {
		return fmt.Errorf("remote write to %s: %d %s", ds, status, b)
	}
	return nil
}

type remoteQuery struct {
	e    *remoteEngine
	path string
	form url.Values
	expr string
}

func (q *remoteQuery) Exec(context.Context) *promql.Result {
	req, _ := http.NewRequest(http.MethodPost, q.e.base+q.path, bytes.NewBufferString(q.form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	b, status, err := q.e.do(req)
	if err != nil {
		return &promql.Result{Err: err}
	}
	return decodeAnswer(b, status)
}

func (*remoteQuery) Close()                          {}
func (*remoteQuery) Statement() parser.Statement     { return nil }
func (*remoteQuery) Stats() *stats.Statistics        { return nil }
func (*remoteQuery) Cancel()                         {}
func (q *remoteQuery) String() string                { return q.expr }

// annotation is a warning or info as the API sent it: its text, and its kind for errors.Is.
type annotation struct {
	msg  string
	kind error
}

func (a annotation) Error() string { return a.msg }
func (a annotation) Unwrap() error { return a.kind }

type answer struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Warnings  []string        `json:"warnings"`
	Infos     []string        `json:"infos"`
	Data      json.RawMessage `json:"data"`
}

type point [2]json.RawMessage

func (p point) time() (int64, error) {
	f, err := strconv.ParseFloat(string(p[0]), 64)
	return int64(math.Round(f * 1000)), err
}

func (p point) float() (float64, error) {
	var s string
	if err := json.Unmarshal(p[1], &s); err != nil {
		return 0, err
	}
	return strconv.ParseFloat(s, 64)
}

func decodeAnswer(b []byte, status int) *promql.Result {
	var a answer
	if err := json.Unmarshal(b, &a); err != nil {
		return &promql.Result{Err: fmt.Errorf("status %d, not JSON: %s", status, b)}
	}
	if a.Status != "success" {
		return &promql.Result{Err: errors.New(a.Error)}
	}
	annos := annotations.Annotations{}
	for _, w := range a.Warnings {
		annos.Add(annotation{w, annotations.PromQLWarning})
	}
	for _, i := range a.Infos {
		annos.Add(annotation{i, annotations.PromQLInfo})
	}
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(a.Data, &data); err != nil {
		return &promql.Result{Err: err}
	}
	val, err := decodeValue(data.ResultType, data.Result)
	return &promql.Result{Value: val, Warnings: annos, Err: err}
}

func decodeValue(typ string, raw json.RawMessage) (parser.Value, error) {
	switch typ {
	case "scalar":
		var p point
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		t, err := p.time()
		if err != nil {
			return nil, err
		}
		v, err := p.float()
		return promql.Scalar{T: t, V: v}, err
	case "string":
		var p point
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		t, err := p.time()
		var s string
		if err == nil {
			err = json.Unmarshal(p[1], &s)
		}
		return promql.String{T: t, V: s}, err
	case "vector":
		var list []struct {
			Metric    map[string]string `json:"metric"`
			Value     *point            `json:"value"`
			Histogram *point            `json:"histogram"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, err
		}
		vec := promql.Vector{}
		for _, s := range list {
			if s.Value == nil {
				return nil, errors.New("native histogram results are not decoded by this harness")
			}
			t, err := s.Value.time()
			if err != nil {
				return nil, err
			}
			v, err := s.Value.float()
			if err != nil {
				return nil, err
			}
			vec = append(vec, promql.Sample{Metric: labels.FromMap(s.Metric), T: t, F: v})
		}
		return vec, nil
	case "matrix":
		var list []struct {
			Metric     map[string]string `json:"metric"`
			Values     []point           `json:"values"`
			Histograms []point           `json:"histograms"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, err
		}
		mat := promql.Matrix{}
		for _, s := range list {
			if len(s.Histograms) > 0 {
				return nil, errors.New("native histogram results are not decoded by this harness")
			}
			series := promql.Series{Metric: labels.FromMap(s.Metric)}
			for _, p := range s.Values {
				t, err := p.time()
				if err != nil {
					return nil, err
				}
				v, err := p.float()
				if err != nil {
					return nil, err
				}
				series.Floats = append(series.Floats, promql.FPoint{T: t, F: v})
			}
			mat = append(mat, series)
		}
		return mat, nil
	}
	return nil, fmt.Errorf("unknown result type %q", typ)
}
