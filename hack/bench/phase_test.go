package main

import (
	"testing"
	"time"
)

func TestStatsAreNearestRankPercentiles(t *testing.T) {
	var hundred []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		hundred = append(hundred, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		name               string
		in                 []time.Duration
		p50, p90, p99, max time.Duration
	}{
		{"1..100 ms", hundred, 50 * time.Millisecond, 90 * time.Millisecond, 99 * time.Millisecond, 100 * time.Millisecond},
		{"one sample", ms(7), 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond, 7 * time.Millisecond},
		{"two samples", ms(100, 500), 100 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
		{"ten samples", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 5 * time.Millisecond, 9 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := stats(tc.in)
			if st.n != len(tc.in) || st.p50 != tc.p50 || st.p90 != tc.p90 || st.p99 != tc.p99 || st.max != tc.max {
				t.Errorf("stats = %+v, want n %d p50 %s p90 %s p99 %s max %s", st, len(tc.in), tc.p50, tc.p90, tc.p99, tc.max)
			}
		})
	}
	if in := ms(3, 1, 2); stats(in).p50 != 2*time.Millisecond || in[0] != 3*time.Millisecond {
		t.Errorf("stats must not sort its argument in place: %v", in)
	}
}

func TestStatsOfNothingIsNoData(t *testing.T) {
	st := stats(nil)
	if st.n != 0 || st.p50 != noData || st.p99 != noData || st.max != noData {
		t.Errorf("stats(nil) = %+v, want noData throughout", st)
	}
	if sec(st.p99) != "–" {
		t.Errorf("sec(noData) = %q, want –", sec(st.p99))
	}
}
