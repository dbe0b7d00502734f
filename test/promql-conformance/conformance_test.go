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
	jsoniter "github.com/json-iterator/go"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/prompb"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/almost"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/jsonutil"
	"github.com/prometheus/prometheus/util/stats"
)

func TestConformance(t *testing.T) {
	base := os.Getenv("LAKEHOUSE_URL")
	key := os.Getenv("LAKEHOUSE_KEY")
	if base == "" || key == "" {
		t.Fatal("set LAKEHOUSE_URL and LAKEHOUSE_KEY")
	}
	e := &remoteEngine{base: base, key: key, client: &http.Client{Timeout: 2 * time.Minute}, run: strconv.FormatInt(time.Now().UnixNano()%1e9, 36),
		reference: promqltest.NewTestEngine(t, false, 0, 1e9)}
	promqltest.RunBuiltinTests(t, e)
}

type remoteEngine struct {
	base, key, run string
	client         *http.Client
	lastHash       uint64
	dataset        string
	n              int
	// reference is Prometheus' engine as promqltest configures it, run on promqltest's local storage
	// only to obtain the native histograms the API's JSON cannot carry in full (see histogramsFromJSON).
	reference *promql.Engine
}

func (e *remoteEngine) NewInstantQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, ts time.Time) (promql.Query, error) {
	ds, err := e.sync(ctx, q)
	if err != nil {
		return nil, err
	}
	form := url.Values{"query": {qs}, "time": {formatTime(ts)}}
	ref := func(ctx context.Context) (promql.Query, error) {
		return e.reference.NewInstantQuery(ctx, q, opts, qs, ts)
	}
	return &remoteQuery{e: e, path: "/prometheus/" + ds + "/api/v1/query", form: form, expr: qs, ref: ref}, nil
}

func (e *remoteEngine) NewRangeQuery(ctx context.Context, q storage.Queryable, opts promql.QueryOpts, qs string, start, end time.Time, step time.Duration) (promql.Query, error) {
	ds, err := e.sync(ctx, q)
	if err != nil {
		return nil, err
	}
	form := url.Values{"query": {qs}, "start": {formatTime(start)}, "end": {formatTime(end)}, "step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}}
	ref := func(ctx context.Context) (promql.Query, error) {
		return e.reference.NewRangeQuery(ctx, q, opts, qs, start, end, step)
	}
	return &remoteQuery{e: e, path: "/prometheus/" + ds + "/api/v1/query_range", form: form, expr: qs, ref: ref}, nil
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
	if err := e.waitFlushed(ds); err != nil {
		return "", err
	}
	e.dataset, e.lastHash = ds, sum
	return ds, nil
}

// waitFlushed waits until the service has flushed what was written to Parquet (the dataset's stats
// report an empty WAL), so that the queries of this data read files, decoded once into the query
// worker's sample cache, rather than scanning the WAL with SQL at every selector: the suite's time was
// mostly those scans. The queries and their answers are the same either way (the test runs the service
// with a short P_FLUSH_INTERVAL; see test/promqlConformance.test.ts). Without LAKEHOUSE_WAIT_FLUSH the
// data is queried as written, WAL and all.
func (e *remoteEngine) waitFlushed(ds string) error {
	if os.Getenv("LAKEHOUSE_WAIT_FLUSH") == "" {
		return nil
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, _ := http.NewRequest(http.MethodGet, e.base+"/api/v1/logstream/"+url.PathEscape(ds)+"/stats", nil)
		b, status, err := e.do(req)
		if err != nil {
			return err
		}
		var st struct {
			Wal struct {
				Count int64 `json:"count"`
			} `json:"wal"`
		}
		if status != http.StatusOK || json.Unmarshal(b, &st) != nil {
			return fmt.Errorf("stats of %s: %d %s", ds, status, b)
		}
		if st.Wal.Count == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: the WAL still holds %d rows after 2 minutes", ds, st.Wal.Count)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	ref  func(context.Context) (promql.Query, error)
}

func (q *remoteQuery) Exec(ctx context.Context) *promql.Result {
	req, _ := http.NewRequest(http.MethodPost, q.e.base+q.path, bytes.NewBufferString(q.form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	b, status, err := q.e.do(req)
	if err != nil {
		return &promql.Result{Err: err}
	}
	res := decodeAnswer(b, status)
	if res.Err == nil && res.Value != nil && hasHistograms(res.Value) {
		res.Err = q.histogramsFromJSON(ctx, res.Value)
	}
	return res
}

func hasHistograms(v parser.Value) bool {
	switch v := v.(type) {
	case promql.Vector:
		for _, s := range v {
			if s.H != nil {
				return true
			}
		}
	case promql.Matrix:
		for _, s := range v {
			if len(s.Histograms) > 0 {
				return true
			}
		}
	}
	return false
}

// histogramsFromJSON gives each native histogram of the service's answer (decoded only as the JSON
// Prometheus' API writes: count, sum and the non-empty buckets' boundaries and counts) the full
// histogram promqltest compares (schema, spans, zero bucket, counter-reset hint), or fails.
//
// The JSON cannot be turned back into that histogram, and promqltest does not hand the expected one to
// an engine. So the same query is run by Prometheus' engine, configured as promqltest configures it, on
// promqltest's local storage (the data the service was loaded with by remote write): each histogram the
// service returned must have a counterpart there (same labels, same timestamp) whose JSON, written by
// Prometheus' own jsonutil.MarshalHistogram, is the service's within promqltest's float tolerance
// (count, sum, and every bucket's boundary rule, lower and upper bound and count). Only then is the
// counterpart put in the result, which promqltest then compares in full with the test file's expected
// histogram. A service histogram that differs in anything the JSON carries fails the evaluation.
func (q *remoteQuery) histogramsFromJSON(ctx context.Context, got parser.Value) error {
	rq, err := q.ref(ctx)
	if err != nil {
		return fmt.Errorf("reference engine: %w", err)
	}
	defer rq.Close()
	rres := rq.Exec(ctx)
	if rres.Err != nil {
		return fmt.Errorf("the service returned histograms where Prometheus' engine fails: %w", rres.Err)
	}
	want := map[string]*histogram.FloatHistogram{}
	key := func(l labels.Labels, t int64) string { return fmt.Sprintf("%s@%d", l.String(), t) }
	switch v := rres.Value.(type) {
	case promql.Vector:
		for _, s := range v {
			if s.H != nil {
				want[key(s.Metric, s.T)] = s.H
			}
		}
	case promql.Matrix:
		for _, s := range v {
			for _, p := range s.Histograms {
				want[key(s.Metric, p.T)] = p.H
			}
		}
	}
	// The service's histogram as decoded holds its JSON only (see decodeHistogram).
	match := func(l labels.Labels, t int64, h *histogram.FloatHistogram) (*histogram.FloatHistogram, error) {
		ref, ok := want[key(l, t)]
		if !ok {
			return nil, fmt.Errorf("the service returned a histogram for %s at %d, Prometheus' engine none", l, t)
		}
		gotJSON := jsonOf[h]
		wantJSON := histogramJSON(ref)
		if !sameHistogramJSON(gotJSON, wantJSON) {
			return nil, fmt.Errorf("histogram for %s at %d: the service returned %s, expected %s", l, t, gotJSON, wantJSON)
		}
		return ref.Copy(), nil
	}
	switch v := got.(type) {
	case promql.Vector:
		for i := range v {
			if v[i].H != nil {
				if v[i].H, err = match(v[i].Metric, v[i].T, v[i].H); err != nil {
					return err
				}
			}
		}
	case promql.Matrix:
		for i := range v {
			for j := range v[i].Histograms {
				p := &v[i].Histograms[j]
				if p.H, err = match(v[i].Metric, p.T, p.H); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// jsonOf keeps the JSON each decoded placeholder histogram came from (the harness runs one query at a
// time).
var jsonOf = map[*histogram.FloatHistogram]json.RawMessage{}

// decodeHistogram stands a placeholder in for a histogram point of the answer, its count and sum
// filled (for messages), its JSON kept for histogramsFromJSON.
func decodeHistogram(p point) (int64, *histogram.FloatHistogram, error) {
	t, err := p.time()
	if err != nil {
		return 0, nil, err
	}
	var hj jsonHistogram
	if err := json.Unmarshal(p[1], &hj); err != nil {
		return 0, nil, fmt.Errorf("histogram %s: %w", p[1], err)
	}
	h := &histogram.FloatHistogram{}
	h.Count, _ = strconv.ParseFloat(hj.Count, 64)
	h.Sum, _ = strconv.ParseFloat(hj.Sum, 64)
	jsonOf[h] = append(json.RawMessage(nil), p[1]...)
	return t, h, nil
}

// histogramJSON is h as Prometheus' API writes it.
func histogramJSON(h *histogram.FloatHistogram) json.RawMessage {
	stream := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(stream)
	jsonutil.MarshalHistogram(h, stream)
	return append(json.RawMessage(nil), stream.Buffer()...)
}

type jsonHistogram struct {
	Count   string               `json:"count"`
	Sum     string               `json:"sum"`
	Buckets [][4]json.RawMessage `json:"buckets"`
}

// sameHistogramJSON compares two histograms in the API's JSON: count, sum, and bucket by bucket the
// boundary rule (exactly) and lower bound, upper bound and count (within promqltest's tolerance).
func sameHistogramJSON(a, b json.RawMessage) bool {
	var x, y jsonHistogram
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	if !sameFloat(x.Count, y.Count) || !sameFloat(x.Sum, y.Sum) || len(x.Buckets) != len(y.Buckets) {
		return false
	}
	for i := range x.Buckets {
		if string(x.Buckets[i][0]) != string(y.Buckets[i][0]) {
			return false
		}
		for k := 1; k < 4; k++ {
			var s, u string
			if json.Unmarshal(x.Buckets[i][k], &s) != nil || json.Unmarshal(y.Buckets[i][k], &u) != nil || !sameFloat(s, u) {
				return false
			}
		}
	}
	return true
}

// floatTolerance is promqltest's (unexported) defaultEpsilon, which it compares every float with.
const floatTolerance = 0.000001

func sameFloat(a, b string) bool {
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	return err1 == nil && err2 == nil && almost.Equal(x, y, floatTolerance)
}

func (*remoteQuery) Close()                      {}
func (*remoteQuery) Statement() parser.Statement { return nil }
func (*remoteQuery) Stats() *stats.Statistics    { return nil }
func (*remoteQuery) Cancel()                     {}
func (q *remoteQuery) String() string            { return q.expr }

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
	clear(jsonOf)
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
				if s.Histogram == nil {
					return nil, errors.New("a sample with neither value nor histogram")
				}
				t, h, err := decodeHistogram(*s.Histogram)
				if err != nil {
					return nil, err
				}
				vec = append(vec, promql.Sample{Metric: labels.FromMap(s.Metric), T: t, H: h})
				continue
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
			series := promql.Series{Metric: labels.FromMap(s.Metric)}
			for _, p := range s.Histograms {
				t, h, err := decodeHistogram(p)
				if err != nil {
					return nil, err
				}
				series.Histograms = append(series.Histograms, promql.HPoint{T: t, H: h})
			}
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
