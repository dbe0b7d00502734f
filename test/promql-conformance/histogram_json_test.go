package conformance

import (
	"testing"

	"github.com/prometheus/prometheus/model/histogram"
)

// The comparison of histograms in the API's JSON: what it must tell apart, and what it must not.
func TestSameHistogramJSON(t *testing.T) {
	base := &histogram.FloatHistogram{
		Schema: 0, Count: 10, Sum: 20, ZeroThreshold: 0.001, ZeroCount: 2,
		PositiveSpans: []histogram.Span{{Offset: 0, Length: 2}}, PositiveBuckets: []float64{3, 5},
	}
	with := func(f func(h *histogram.FloatHistogram)) *histogram.FloatHistogram {
		h := base.Copy()
		f(h)
		return h
	}
	cases := []struct {
		name string
		h    *histogram.FloatHistogram
		same bool
	}{
		{"identical", base.Copy(), true},
		{"count within tolerance", with(func(h *histogram.FloatHistogram) { h.Count = 10.000000001 }), true},
		{"an empty bucket more in the spans", with(func(h *histogram.FloatHistogram) {
			h.PositiveSpans = []histogram.Span{{Offset: 0, Length: 3}}
			h.PositiveBuckets = []float64{3, 5, 0}
		}), true},
		{"count", with(func(h *histogram.FloatHistogram) { h.Count = 11 }), false},
		{"sum", with(func(h *histogram.FloatHistogram) { h.Sum = 21 }), false},
		{"a bucket count", with(func(h *histogram.FloatHistogram) { h.PositiveBuckets = []float64{3, 6} }), false},
		{"bucket bounds (schema)", with(func(h *histogram.FloatHistogram) { h.Schema = 1 }), false},
		{"zero bucket width", with(func(h *histogram.FloatHistogram) { h.ZeroThreshold = 0.01 }), false},
		{"zero bucket count", with(func(h *histogram.FloatHistogram) { h.ZeroCount = 0 }), false},
		{"a bucket more", with(func(h *histogram.FloatHistogram) {
			h.PositiveSpans = []histogram.Span{{Offset: 0, Length: 3}}
			h.PositiveBuckets = []float64{3, 5, 1}
		}), false},
		{"negative buckets instead of positive (bounds and boundary rule)", with(func(h *histogram.FloatHistogram) {
			h.PositiveSpans, h.PositiveBuckets = nil, nil
			h.NegativeSpans, h.NegativeBuckets = []histogram.Span{{Offset: 0, Length: 2}}, []float64{3, 5}
		}), false},
	}
	for _, c := range cases {
		if got := sameHistogramJSON(histogramJSON(c.h), histogramJSON(base)); got != c.same {
			t.Errorf("%s: %s vs %s: same=%v, want %v", c.name, histogramJSON(c.h), histogramJSON(base), got, c.same)
		}
	}
}
