// Package main is Prometheus' own PromQL engine, run as a child process of each query worker
// process (src/query/promql/engine.ts) that has run a PromQL job. The engine evaluates queries exactly
// as Prometheus does; this file is only the storage adapter and the JSON of the answers (main.go is the
// process: its framed protocol and its sandbox).
//
// The storage is the worker's: Select asks it for the series matching the selector's matchers in the
// selector's time range (the engine's hints: already widened by the lookback, range, offset and @),
// which it answers with DuckDB over the dataset's files. (One fetch per selector, with the engine's
// own ranges, rather than a two-phase protocol that would have to redo the engine's range arithmetic
// in JavaScript.)
package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	jsoniter "github.com/json-iterator/go"

	"github.com/prometheus/prometheus/model/histogram"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/storage"
	"github.com/prometheus/prometheus/tsdb/chunkenc"
	"github.com/prometheus/prometheus/util/annotations"
	"github.com/prometheus/prometheus/util/jsonutil"
)

// The parser accepts what Prometheus' own test suite uses: experimental functions (limitk, sort_by_label…),
// fill modifiers and unquoted UTF-8 names. Queries valid in a stock Prometheus parse the same.
var promParser = parser.NewParser(parser.Options{
	EnableExperimentalFunctions: true,
	EnableBinopFillModifiers:    true,
	EnableUnquotedUTF8Names:     true,
	Functions:                   withPrometheus2Names(),
})

// withPrometheus2Names is the parser's functions plus the names Prometheus 2.x had for functions that
// Prometheus 3 renamed: holt_winters is double_exponential_smoothing (renamed in 3.0, same arguments and
// maths), so that dashboards and rules written for 2.x keep working. The alias is the same function
// (the parsed expression names it by its new name, and the engine evaluates it as such).
func withPrometheus2Names() map[string]*parser.Function {
	fns := maps.Clone(parser.Functions)
	fns["holt_winters"] = parser.Functions["double_exponential_smoothing"]
	return fns
}

var engines = map[int]*promql.Engine{}

func engineFor(maxSamples int) *promql.Engine {
	if e, ok := engines[maxSamples]; ok {
		return e
	}
	e := promql.NewEngine(promql.EngineOpts{
		MaxSamples: maxSamples,
		// The service's time limit ends a query (the worker process is killed); this is only a backstop.
		Timeout:                  24 * time.Hour,
		LookbackDelta:            5 * time.Minute,
		NoStepSubqueryIntervalFn: func(int64) int64 { return time.Minute.Milliseconds() },
		EnableAtModifier:         true,
		EnableNegativeOffset:     true,
		EnableDelayedNameRemoval: true,
		Parser:                   promParser,
	})
	engines[maxSamples] = e
	return e
}

// request is what JavaScript asks for.
type request struct {
	Op         string   `json:"op"` // query, query_range, series, labels, label_values
	Query      string   `json:"query"`
	Time       int64    `json:"time"`
	Start      int64    `json:"start"`
	End        int64    `json:"end"`
	Step       int64    `json:"step"`
	LookbackMs int64    `json:"lookbackMs"`
	MaxSamples int      `json:"maxSamples"`
	Match      []string `json:"match"`
	Name       string   `json:"name"`
	Limit      int      `json:"limit"`
}

// apiError is an answer's error, typed as Prometheus' API types them.
type apiError struct {
	typ string // bad_data, execution, timeout, canceled, internal
	msg string
}

func (e *apiError) Error() string { return e.msg }

// answer evaluates one request (JSON) against the storage behind fetch and gives the API's JSON body:
// Prometheus' success envelope, or its error envelope with the error typed as Prometheus' API types it.
func answer(reqText []byte, fetch fetchFunc) []byte {
	var req request
	var out string
	err := json.Unmarshal(reqText, &req)
	if err != nil {
		err = &apiError{"bad_data", err.Error()}
	} else {
		out, err = handle(&req, fetch)
	}
	if err != nil {
		var ae *apiError
		if !errors.As(err, &ae) {
			ae = &apiError{"internal", err.Error()}
		}
		b, _ := json.Marshal(struct {
			Status    string `json:"status"`
			ErrorType string `json:"errorType"`
			Error     string `json:"error"`
		}{"error", ae.typ, ae.msg})
		return b
	}
	return []byte(out)
}

func handle(req *request, fetch fetchFunc) (string, error) {
	q := &queryable{fetch: fetch}
	switch req.Op {
	case "query", "query_range":
		return runQuery(req, q)
	case "series", "labels", "label_values":
		return runMeta(req, q)
	}
	return "", &apiError{"bad_data", "unknown operation " + req.Op}
}

func runQuery(req *request, q *queryable) (string, error) {
	ng := engineFor(req.MaxSamples)
	opts := promql.NewPrometheusQueryOpts(false, time.Duration(req.LookbackMs)*time.Millisecond, nil)
	ctx := context.Background()
	var qry promql.Query
	var err error
	if req.Op == "query" {
		qry, err = ng.NewInstantQuery(ctx, q, opts, req.Query, time.UnixMilli(req.Time))
	} else {
		qry, err = ng.NewRangeQuery(ctx, q, opts, req.Query, time.UnixMilli(req.Start), time.UnixMilli(req.End), time.Duration(req.Step)*time.Millisecond)
	}
	if err != nil {
		return "", &apiError{"bad_data", err.Error()}
	}
	defer qry.Close()
	res := qry.Exec(ctx)
	if res.Err != nil {
		return "", classify(res.Err)
	}
	warnings, infos := res.Warnings.AsStrings(req.Query, 10, 10)
	s := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
	defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(s)
	s.WriteObjectStart()
	s.WriteObjectField("status")
	s.WriteString("success")
	s.WriteMore()
	s.WriteObjectField("data")
	s.WriteObjectStart()
	s.WriteObjectField("resultType")
	s.WriteString(string(res.Value.Type()))
	s.WriteMore()
	s.WriteObjectField("result")
	writeValue(s, res.Value)
	s.WriteObjectEnd()
	writeStrings(s, "warnings", warnings)
	writeStrings(s, "infos", infos)
	s.WriteObjectEnd()
	return string(s.Buffer()), nil
}

// classify maps engine errors to Prometheus' API error types (web/api/v1 returnAPIError).
func classify(err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	switch err.(type) {
	case promql.ErrQueryCanceled:
		return &apiError{"canceled", err.Error()}
	case promql.ErrQueryTimeout:
		return &apiError{"timeout", err.Error()}
	case promql.ErrStorage:
		return &apiError{"internal", err.Error()}
	}
	if errors.Is(err, context.Canceled) {
		return &apiError{"canceled", err.Error()}
	}
	return &apiError{"execution", err.Error()}
}

func writeStrings(s *jsoniter.Stream, field string, list []string) {
	if len(list) == 0 {
		return
	}
	s.WriteMore()
	s.WriteObjectField(field)
	s.WriteArrayStart()
	for i, w := range list {
		if i > 0 {
			s.WriteMore()
		}
		s.WriteString(w)
	}
	s.WriteArrayEnd()
}

func writeLabels(s *jsoniter.Stream, l labels.Labels) {
	s.WriteObjectStart()
	i := 0
	l.Range(func(lb labels.Label) {
		if i > 0 {
			s.WriteMore()
		}
		i++
		s.WriteObjectField(lb.Name)
		s.WriteString(lb.Value)
	})
	s.WriteObjectEnd()
}

func writePoint(s *jsoniter.Stream, t int64, f float64, h *histogram.FloatHistogram) {
	s.WriteArrayStart()
	jsonutil.MarshalTimestamp(t, s)
	s.WriteMore()
	if h != nil {
		jsonutil.MarshalHistogram(h, s)
	} else {
		jsonutil.MarshalFloat(f, s)
	}
	s.WriteArrayEnd()
}

// writeValue writes a result as Prometheus' HTTP API does (web/api/v1/json_codec.go).
func writeValue(s *jsoniter.Stream, v parser.Value) {
	switch val := v.(type) {
	case promql.Matrix:
		s.WriteArrayStart()
		for i, series := range val {
			if i > 0 {
				s.WriteMore()
			}
			s.WriteObjectStart()
			s.WriteObjectField("metric")
			writeLabels(s, series.Metric)
			if len(series.Floats) > 0 {
				s.WriteMore()
				s.WriteObjectField("values")
				s.WriteArrayStart()
				for j, p := range series.Floats {
					if j > 0 {
						s.WriteMore()
					}
					writePoint(s, p.T, p.F, nil)
				}
				s.WriteArrayEnd()
			}
			if len(series.Histograms) > 0 {
				s.WriteMore()
				s.WriteObjectField("histograms")
				s.WriteArrayStart()
				for j, p := range series.Histograms {
					if j > 0 {
						s.WriteMore()
					}
					writePoint(s, p.T, 0, p.H)
				}
				s.WriteArrayEnd()
			}
			s.WriteObjectEnd()
		}
		s.WriteArrayEnd()
	case promql.Vector:
		s.WriteArrayStart()
		for i, sample := range val {
			if i > 0 {
				s.WriteMore()
			}
			s.WriteObjectStart()
			s.WriteObjectField("metric")
			writeLabels(s, sample.Metric)
			s.WriteMore()
			if sample.H != nil {
				s.WriteObjectField("histogram")
			} else {
				s.WriteObjectField("value")
			}
			writePoint(s, sample.T, sample.F, sample.H)
			s.WriteObjectEnd()
		}
		s.WriteArrayEnd()
	case promql.Scalar:
		writePoint(s, val.T, val.V, nil)
	case promql.String:
		s.WriteArrayStart()
		jsonutil.MarshalTimestamp(val.T, s)
		s.WriteMore()
		s.WriteString(val.V)
		s.WriteArrayEnd()
	default:
		s.WriteNil()
	}
}

// runMeta answers series, labels and label values: the match[] selectors are parsed here, their series
// fetched without samples, and the answer computed from their label sets.
func runMeta(req *request, q *queryable) (string, error) {
	matchers := [][]*labels.Matcher{}
	for _, m := range req.Match {
		ms, err := promParser.ParseMetricSelector(m)
		if err != nil {
			return "", &apiError{"bad_data", err.Error()}
		}
		matchers = append(matchers, ms)
	}
	if req.Op == "series" && len(matchers) == 0 {
		return "", &apiError{"bad_data", "no match[] parameter provided"}
	}
	if len(matchers) == 0 {
		// Every series: a matcher that matches any label set.
		matchers = append(matchers, []*labels.Matcher{labels.MustNewMatcher(labels.MatchRegexp, labels.MetricName, ".*")})
	}
	hints := &storage.SelectHints{Start: req.Start, End: req.End, Func: "series"}
	seen := map[uint64]labels.Labels{}
	for _, ms := range matchers {
		set, err := q.fetchSeries(hints, ms, true)
		if err != nil {
			return "", err
		}
		for _, s := range set {
			seen[s.lset.Hash()] = s.lset
		}
	}
	all := make([]labels.Labels, 0, len(seen))
	for _, l := range seen {
		all = append(all, l)
	}
	sort.Slice(all, func(i, j int) bool { return labels.Compare(all[i], all[j]) < 0 })
	var out []string
	switch req.Op {
	case "series":
		s := jsoniter.ConfigCompatibleWithStandardLibrary.BorrowStream(nil)
		defer jsoniter.ConfigCompatibleWithStandardLibrary.ReturnStream(s)
		s.WriteRaw(`{"status":"success","data":[`)
		n := len(all)
		if req.Limit > 0 && n > req.Limit {
			n = req.Limit
		}
		for i := 0; i < n; i++ {
			if i > 0 {
				s.WriteMore()
			}
			writeLabels(s, all[i])
		}
		s.WriteRaw(`]`)
		if n < len(all) {
			s.WriteRaw(`,"warnings":["results truncated due to limit"]`)
		}
		s.WriteRaw(`}`)
		return string(s.Buffer()), nil
	case "labels":
		names := map[string]struct{}{}
		for _, l := range all {
			l.Range(func(lb labels.Label) { names[lb.Name] = struct{}{} })
		}
		for n := range names {
			out = append(out, n)
		}
	case "label_values":
		values := map[string]struct{}{}
		for _, l := range all {
			if v := l.Get(req.Name); v != "" {
				values[v] = struct{}{}
			}
		}
		for v := range values {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	truncated := false
	if req.Limit > 0 && len(out) > req.Limit {
		out = out[:req.Limit]
		truncated = true
	}
	if out == nil {
		out = []string{}
	}
	// A struct, not a map: Prometheus writes "status" first, and so do we.
	body := struct {
		Status   string   `json:"status"`
		Data     []string `json:"data"`
		Warnings []string `json:"warnings,omitempty"`
	}{Status: "success", Data: out}
	if truncated {
		body.Warnings = []string{"results truncated due to limit"}
	}
	b, err := json.Marshal(body)
	return string(b), err
}

// ---- storage adapter ----

// fetchFunc asks the query worker for a selector's series (the request as JSON, see fetchSeries) and
// gives its binary answer (decodeSeries).
type fetchFunc func(req []byte) ([]byte, error)

type queryable struct{ fetch fetchFunc }

func (q *queryable) Querier(mint, maxt int64) (storage.Querier, error) {
	return &querier{q: q, mint: mint, maxt: maxt}, nil
}

type querier struct {
	q          *queryable
	mint, maxt int64
}

func (*querier) Close() error { return nil }

func (*querier) LabelValues(context.Context, string, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, errors.New("label values are answered by the API, not the engine")
}

func (*querier) LabelNames(context.Context, *storage.LabelHints, ...*labels.Matcher) ([]string, annotations.Annotations, error) {
	return nil, nil, errors.New("label names are answered by the API, not the engine")
}

func (qr *querier) Select(_ context.Context, _ bool, hints *storage.SelectHints, matchers ...*labels.Matcher) storage.SeriesSet {
	h := storage.SelectHints{Start: qr.mint, End: qr.maxt}
	if hints != nil {
		h = *hints
	}
	list, err := qr.q.fetchSeries(&h, matchers, h.Func == "series")
	if err != nil {
		return storage.ErrSeriesSet(err)
	}
	return &seriesSet{list: list, i: -1}
}

type matcherJSON struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
}

// fetchSeries asks JavaScript for the series the matchers select in [hints.Start, hints.End]. The
// matchers are pushed down to SQL there as a prefilter (a superset); they are checked here exactly.
func (q *queryable) fetchSeries(hints *storage.SelectHints, matchers []*labels.Matcher, labelsOnly bool) ([]*series, error) {
	ms := make([]matcherJSON, len(matchers))
	for i, m := range matchers {
		ms[i] = matcherJSON{m.Type.String(), m.Name, m.Value}
	}
	reqJSON, _ := json.Marshal(map[string]any{"matchers": ms, "start": hints.Start, "end": hints.End, "labelsOnly": labelsOnly})
	buf, err := q.fetch(reqJSON)
	if err != nil {
		return nil, err
	}
	list, err := decodeSeries(buf)
	if err != nil {
		return nil, err
	}
	out := list[:0]
	for _, s := range list {
		ok := true
		for _, m := range matchers {
			if !m.Matches(s.lset.Get(m.Name)) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return labels.Compare(out[i].lset, out[j].lset) < 0 })
	// Rows of one label set may arrive as several groups (a label stored in two columns over time): merge.
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && labels.Equal(merged[n-1].lset, s.lset) {
			merged[n-1].merge(s)
			continue
		}
		merged = append(merged, s)
	}
	return merged, nil
}

type series struct {
	lset labels.Labels
	ts   []int64
	vals []float64
	// hs[i] is sample i's native histogram (nil: a float sample); nil when the series has none.
	hs []*histogram.FloatHistogram
}

func (s *series) hist(i int) *histogram.FloatHistogram {
	if s.hs == nil {
		return nil
	}
	return s.hs[i]
}

// merge adds another group's samples, keeping time order and one sample per timestamp.
func (s *series) merge(o *series) {
	type pt struct {
		t int64
		v float64
		h *histogram.FloatHistogram
	}
	pts := make([]pt, 0, len(s.ts)+len(o.ts))
	for i := range s.ts {
		pts = append(pts, pt{s.ts[i], s.vals[i], s.hist(i)})
	}
	for i := range o.ts {
		pts = append(pts, pt{o.ts[i], o.vals[i], o.hist(i)})
	}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i].t < pts[j].t })
	s.ts, s.vals, s.hs = nil, nil, nil
	var hs []*histogram.FloatHistogram
	for _, p := range pts {
		if n := len(s.ts); n > 0 && s.ts[n-1] == p.t {
			s.vals[n-1], hs[n-1] = p.v, p.h
			continue
		}
		s.ts = append(s.ts, p.t)
		s.vals = append(s.vals, p.v)
		hs = append(hs, p.h)
	}
	for _, h := range hs {
		if h != nil {
			s.hs = hs
			break
		}
	}
}

// decodeSeries reads the worker's binary answer (src/query/promql/storage.ts encodeSeries, little-endian):
// u32 series; per series u32 labels, each a string (u32 length + UTF-8) name and value; u32 samples n;
// then n i64 times (ms), n f64 values, n u8 kinds (0 float, 1 staleness marker, 2 native histogram,
// whose value is its sum), and a string of JSON per native histogram (its stored columns). Samples come
// in any order: they are sorted here, and of several at one timestamp the last is kept.
func decodeSeries(b []byte) ([]*series, error) {
	r := reader{b: b}
	n := int(r.u32())
	out := make([]*series, 0, n)
	builder := labels.NewScratchBuilder(8)
	for i := 0; i < n && r.err == nil; i++ {
		nl := int(r.u32())
		builder.Reset()
		for j := 0; j < nl && r.err == nil; j++ {
			name := r.str()
			val := r.str()
			if val != "" {
				builder.Add(name, val)
			}
		}
		builder.Sort()
		s := &series{lset: builder.Labels()}
		if err := s.readSamples(&r); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	if r.err != nil {
		return nil, r.err
	}
	return out, nil
}

func (s *series) readSamples(r *reader) error {
	n := int(r.u32())
	if n == 0 || r.err != nil {
		return r.err
	}
	ts := r.raw(8 * n)
	vs := r.raw(8 * n)
	kinds := r.raw(n)
	if r.err != nil {
		return r.err
	}
	s.ts = make([]int64, n)
	s.vals = make([]float64, n)
	sorted := true
	for i := range n {
		s.ts[i] = int64(binary.LittleEndian.Uint64(ts[8*i:]))
		s.vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(vs[8*i:]))
		if i > 0 && s.ts[i] <= s.ts[i-1] {
			sorted = false
		}
	}
	for i, k := range kinds {
		switch k {
		case 0:
		case 1:
			s.vals[i] = math.Float64frombits(value.StaleNaN)
		case 2:
			h, err := decodeHistogram(r.bytes(), s.vals[i])
			if r.err != nil {
				return r.err
			}
			if err != nil {
				return err
			}
			if s.hs == nil {
				s.hs = make([]*histogram.FloatHistogram, n)
			}
			s.hs[i] = h
		default:
			return fmt.Errorf("stored sample of unknown kind %d", k)
		}
	}
	if !sorted {
		s.sortSamples()
	}
	return nil
}

// sortSamples puts the samples in time order, keeping the last of several at one timestamp. DuckDB's
// list aggregate gives a series' samples as runs in time order (each of its threads appends what it
// scanned), so the usual case is runs that only need putting in order of their first sample; samples
// at one timestamp, or runs that overlap, take a full stable sort.
func (s *series) sortSamples() {
	type run struct{ from, to int }
	var runs []run
	from := 0
	for i := 1; i <= len(s.ts); i++ {
		if i == len(s.ts) || s.ts[i] <= s.ts[i-1] {
			runs = append(runs, run{from, i})
			from = i
		}
	}
	slices.SortStableFunc(runs, func(a, b run) int { return cmp.Compare(s.ts[a.from], s.ts[b.from]) })
	disjoint := true
	for i := 1; i < len(runs) && disjoint; i++ {
		disjoint = s.ts[runs[i].from] > s.ts[runs[i-1].to-1]
	}
	if disjoint {
		ts := make([]int64, 0, len(s.ts))
		vals := make([]float64, 0, len(s.ts))
		var hs []*histogram.FloatHistogram
		if s.hs != nil {
			hs = make([]*histogram.FloatHistogram, 0, len(s.ts))
		}
		for _, r := range runs {
			ts = append(ts, s.ts[r.from:r.to]...)
			vals = append(vals, s.vals[r.from:r.to]...)
			if hs != nil {
				hs = append(hs, s.hs[r.from:r.to]...)
			}
		}
		s.ts, s.vals, s.hs = ts, vals, hs
		return
	}
	type sample struct {
		t int64
		v float64
		h *histogram.FloatHistogram
	}
	samples := make([]sample, len(s.ts))
	for i := range s.ts {
		samples[i] = sample{s.ts[i], s.vals[i], s.hist(i)}
	}
	slices.SortStableFunc(samples, func(a, b sample) int { return cmp.Compare(a.t, b.t) })
	hasHist := s.hs != nil
	s.ts, s.vals, s.hs = s.ts[:0], s.vals[:0], nil
	var hs []*histogram.FloatHistogram
	for _, p := range samples {
		if n := len(s.ts); n > 0 && s.ts[n-1] == p.t {
			s.vals[n-1] = p.v
			if hasHist {
				hs[n-1] = p.h
			}
			continue
		}
		s.ts = append(s.ts, p.t)
		s.vals = append(s.vals, p.v)
		if hasHist {
			hs = append(hs, p.h)
		}
	}
	s.hs = hs
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) need(n int) bool {
	if r.err != nil {
		return false
	}
	if r.off+n > len(r.b) {
		r.err = fmt.Errorf("series answer truncated at byte %d", r.off)
		return false
	}
	return true
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) str() string {
	return strings.Clone(string(r.bytes()))
}

func (r *reader) bytes() []byte {
	return r.raw(int(r.u32()))
}

func (r *reader) raw(n int) []byte {
	if !r.need(n) {
		return nil
	}
	b := r.b[r.off : r.off+n]
	r.off += n
	return b
}

// storedHistogram is a native histogram sample's columns (src/ingest/prometheus/series.ts).
type storedHistogram struct {
	Count  float64          `json:"count"`
	Schema int32            `json:"schema"`
	ZT     float64          `json:"zt"`
	ZC     float64          `json:"zc"`
	PS     []histogram.Span `json:"ps"`
	NS     []histogram.Span `json:"ns"`
	PD     []int64          `json:"pd"`
	ND     []int64          `json:"nd"`
	PC     []float64        `json:"pc"`
	NC     []float64        `json:"nc"`
	CV     []float64        `json:"cv"`
	RH     int              `json:"rh"`
}

// decodeHistogram rebuilds a float histogram from its stored columns: integer histograms (deltas)
// become absolute float counts, which is how the engine computes with them anyway.
func decodeHistogram(raw []byte, sum float64) (*histogram.FloatHistogram, error) {
	var h storedHistogram
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("stored native histogram: %w", err)
	}
	abs := func(deltas []int64, counts []float64) []float64 {
		if len(counts) > 0 {
			return counts
		}
		out := make([]float64, len(deltas))
		var c int64
		for i, d := range deltas {
			c += d
			out[i] = float64(c)
		}
		return out
	}
	return &histogram.FloatHistogram{
		CounterResetHint: histogram.CounterResetHint(h.RH),
		Schema:           h.Schema,
		ZeroThreshold:    h.ZT,
		ZeroCount:        h.ZC,
		Count:            h.Count,
		Sum:              sum,
		PositiveSpans:    h.PS,
		NegativeSpans:    h.NS,
		PositiveBuckets:  abs(h.PD, h.PC),
		NegativeBuckets:  abs(h.ND, h.NC),
		CustomValues:     h.CV,
	}, nil
}

type seriesSet struct {
	list []*series
	i    int
}

func (s *seriesSet) Next() bool                                { s.i++; return s.i < len(s.list) }
func (s *seriesSet) At() storage.Series                        { return s.list[s.i] }
func (*seriesSet) Err() error                                  { return nil }
func (*seriesSet) Warnings() annotations.Annotations           { return nil }
func (s *series) Labels() labels.Labels                        { return s.lset }
func (s *series) Iterator(chunkenc.Iterator) chunkenc.Iterator { return &iterator{s: s, i: -1} }

type iterator struct {
	s *series
	i int
}

func (it *iterator) typ() chunkenc.ValueType {
	if it.s.hist(it.i) != nil {
		return chunkenc.ValFloatHistogram
	}
	return chunkenc.ValFloat
}

func (it *iterator) Next() chunkenc.ValueType {
	it.i++
	if it.i >= len(it.s.ts) {
		it.i = len(it.s.ts)
		return chunkenc.ValNone
	}
	return it.typ()
}

func (it *iterator) Seek(t int64) chunkenc.ValueType {
	if it.i < 0 {
		it.i = 0
	}
	if it.i >= len(it.s.ts) {
		return chunkenc.ValNone
	}
	if it.s.ts[it.i] >= t {
		return it.typ()
	}
	rest := it.s.ts[it.i:]
	it.i += sort.Search(len(rest), func(k int) bool { return rest[k] >= t })
	if it.i >= len(it.s.ts) {
		return chunkenc.ValNone
	}
	return it.typ()
}

func (it *iterator) At() (int64, float64) { return it.s.ts[it.i], it.s.vals[it.i] }
func (it *iterator) AtHistogram(*histogram.Histogram) (int64, *histogram.Histogram) {
	return it.s.ts[it.i], nil
}
func (it *iterator) AtFloatHistogram(fh *histogram.FloatHistogram) (int64, *histogram.FloatHistogram) {
	h := it.s.hist(it.i)
	if h == nil {
		return it.s.ts[it.i], nil
	}
	if fh == nil {
		return it.s.ts[it.i], h.Copy()
	}
	h.CopyTo(fh)
	return it.s.ts[it.i], fh
}
func (it *iterator) AtT() int64 { return it.s.ts[it.i] }
func (*iterator) AtST() int64   { return 0 }
func (*iterator) Err() error    { return nil }
