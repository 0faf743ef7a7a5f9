package jmespath

import "testing"

func TestTimeFunctions(t *testing.T) {
	// testNow is 2024-03-10T12:30:45+01:00.
	runFnCases(t, []fnCase{
		{expr: "time_now()", want: "2024-03-10T12:30:45+01:00"},
		{expr: "time_now_utc()", want: "2024-03-10T11:30:45Z"},
		{expr: "time_since('', '2024-03-10T10:00:00Z', '2024-03-10T11:30:00Z')", want: "1h30m0s"},
		{expr: "time_since('', '2024-03-10T11:00:00Z', '')", want: "30m45s"},
		{expr: "time_since('2006-01-02', '2024-03-01', '2024-03-03')", want: "48h0m0s"},
		{expr: "time_since('', 'yesterday', '')", wantErr: "argument 2"},
		{expr: "time_add('2024-03-10T10:00:00Z', '90m')", want: "2024-03-10T11:30:00Z"},
		{expr: "time_add('2024-03-10T10:00:00Z', 'soon')", wantErr: "argument 2"},
		{expr: "time_parse('2006-01-02', '2024-03-10')", want: "2024-03-10T00:00:00Z"},
		{expr: "time_parse('Mon Jan 2 15:04:05 MST 2006', 'Sun Mar 10 12:00:00 UTC 2024')", want: "2024-03-10T12:00:00Z"},
		{expr: "time_parse('1', '1710072000')", want: "2024-03-10T12:00:00Z"},
		{expr: "time_parse('1', 'x')", wantErr: "epoch seconds"},
		{expr: "time_parse('2006-01-02', 'x')", wantErr: "argument 2"},
		{expr: "time_to_cron('2024-03-10T13:05:00+01:00')", want: "5 12 10 3 0"},
		{expr: "time_utc('2024-03-10T13:05:00+01:00')", want: "2024-03-10T12:05:00Z"},
		{expr: "time_diff('2024-03-10T10:00:00Z', '2024-03-10T09:00:00Z')", want: "-1h0m0s"},
		{expr: "time_before('2024-03-10T10:00:00Z', '2024-03-10T11:00:00+01:00')", want: false},
		{expr: "time_before('2024-03-10T09:00:00Z', '2024-03-10T10:00:00Z')", want: true},
		{expr: "time_after('2024-03-10T11:00:00Z', '2024-03-10T10:00:00Z')", want: true},
		{expr: "time_between('2024-03-10T10:00:00Z', '2024-03-10T09:00:00Z', '2024-03-10T11:00:00Z')", want: true},
		{expr: "time_between('2024-03-10T09:00:00Z', '2024-03-10T09:00:00Z', '2024-03-10T11:00:00Z')", want: false},
		{expr: "time_between('2024-03-10T11:00:00Z', '2024-03-10T09:00:00Z', '2024-03-10T11:00:00Z')", want: false},
		{expr: "time_between('x', '2024-03-10T09:00:00Z', '2024-03-10T11:00:00Z')", wantErr: "argument 1"},
		{expr: "time_truncate('2024-03-10T10:47:13Z', '15m')", want: "2024-03-10T10:45:00Z"},
		{expr: "time_truncate('2024-03-10T10:47:13Z', '1x')", wantErr: "argument 2"},
	})
}
