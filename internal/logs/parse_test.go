package logs

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseCRI(t *testing.T) {
	ts := time.Date(2024, 1, 2, 3, 4, 5, 123456789, time.UTC)
	tests := []struct {
		name    string
		raw     string
		want    record
		wantErr bool
	}{
		{name: "full stdout line", raw: "2024-01-02T03:04:05.123456789Z stdout F hello world\n",
			want: record{ts: ts, stream: streamStdout, newline: true, msg: []byte("hello world")}},
		{name: "partial stderr line", raw: "2024-01-02T03:04:05.123456789Z stderr P part\n",
			want: record{ts: ts, stream: streamStderr, partial: true, newline: true, msg: []byte("part")}},
		{name: "extra tags ignored", raw: "2024-01-02T03:04:05.123456789Z stdout P:x:y frag\n",
			want: record{ts: ts, stream: streamStdout, partial: true, newline: true, msg: []byte("frag")}},
		{name: "unknown first tag ends the line", raw: "2024-01-02T03:04:05.123456789Z stdout X m\n",
			want: record{ts: ts, stream: streamStdout, newline: true, msg: []byte("m")}},
		{name: "empty message", raw: "2024-01-02T03:04:05.123456789Z stdout F \n",
			want: record{ts: ts, stream: streamStdout, newline: true, msg: []byte{}}},
		{name: "spaces kept in the message", raw: "2024-01-02T03:04:05.123456789Z stdout F  a  b \n",
			want: record{ts: ts, stream: streamStdout, newline: true, msg: []byte(" a  b ")}},
		{name: "no newline at the end of the file", raw: "2024-01-02T03:04:05.123456789Z stdout F last",
			want: record{ts: ts, stream: streamStdout, msg: []byte("last")}},
		{name: "offset timestamp", raw: "2024-01-02T05:04:05.123456789+02:00 stdout F x\n",
			want: record{ts: ts, stream: streamStdout, newline: true, msg: []byte("x")}},
		{name: "not a log line", raw: "garbage\n", wantErr: true},
		{name: "bad timestamp", raw: "yesterday stdout F x\n", wantErr: true},
		{name: "bad stream", raw: "2024-01-02T03:04:05Z stdin F x\n", wantErr: true},
		{name: "no tag", raw: "2024-01-02T03:04:05Z stdout\n", wantErr: true},
		{name: "no message separator", raw: "2024-01-02T03:04:05Z stdout F\n", wantErr: true},
		{name: "docker json is not CRI", raw: `{"log":"x\n","stream":"stdout","time":"2024-01-02T03:04:05Z"}` + "\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCRI([]byte(tt.raw))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !got.ts.Equal(tt.want.ts) {
				t.Errorf("ts = %v, want %v", got.ts, tt.want.ts)
			}
			got.ts = tt.want.ts
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(record{})); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

// t0 is the time of the test logs' first record; record i is i ms later.
var t0 = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Millisecond) }

// cri is one CRI log line written at(i).
func cri(i int, stream, tag, msg string) string {
	return at(i).Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + msg + "\n"
}

func TestJoin(t *testing.T) {
	tests := []struct {
		name string
		raw  []string
		opts Options
		want string
	}{
		{
			name: "full lines of both streams in order",
			raw:  []string{cri(1, "stdout", "F", "a"), cri(2, "stderr", "F", "b"), cri(3, "stdout", "F", "c")},
			want: "a\nb\nc\n",
		},
		{
			name: "partial lines joined",
			raw:  []string{cri(1, "stdout", "P", "he"), cri(2, "stdout", "P", "ll"), cri(3, "stdout", "F", "o")},
			want: "hello\n",
		},
		{
			name: "a line of the other stream finished meanwhile comes first",
			raw:  []string{cri(1, "stdout", "P", "out-"), cri(2, "stderr", "F", "err"), cri(3, "stdout", "F", "line")},
			want: "err\nout-line\n",
		},
		{
			name: "both streams mid-line",
			raw: []string{cri(1, "stdout", "P", "o1"), cri(2, "stderr", "P", "e1"), cri(3, "stderr", "F", "e2"),
				cri(4, "stdout", "F", "o2")},
			want: "e1e2\no1o2\n",
		},
		{
			name: "malformed lines skipped",
			raw:  []string{cri(1, "stdout", "F", "a"), "garbage\n", "\n", cri(2, "stdout", "F", "b")},
			want: "a\nb\n",
		},
		{
			name: "timestamps: a joined line has its first fragment's",
			raw:  []string{cri(1, "stdout", "P", "x"), cri(2, "stderr", "F", "y"), cri(3, "stdout", "F", "z")},
			opts: Options{Timestamps: true},
			want: "2024-01-02T03:04:05.002000000Z y\n2024-01-02T03:04:05.001000000Z xz\n",
		},
		{
			name: "since skips older lines",
			raw:  []string{cri(1, "stdout", "F", "a"), cri(2, "stdout", "F", "b"), cri(3, "stdout", "F", "c")},
			opts: Options{SinceTime: at(2)},
			want: "b\nc\n",
		},
		{
			name: "limit cuts within a line",
			raw:  []string{cri(1, "stdout", "F", "abc"), cri(2, "stdout", "F", "def")},
			opts: Options{LimitBytes: 6},
			want: "abc\nde",
		},
		{
			name: "unfinished line flushed at the end, without a newline",
			raw:  []string{cri(1, "stdout", "F", "a"), cri(2, "stdout", "P", "b")},
			want: "a\nb",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.opts.TailLines = -1
			o := newOutput(&buf, tt.opts)
			j := joiner{out: o.line}
			var err error
			for _, raw := range tt.raw {
				rec, perr := parseCRI([]byte(raw))
				if perr != nil {
					continue
				}
				if err = j.add(rec); err != nil {
					break
				}
			}
			if err == nil {
				err = j.flush()
			}
			if err != nil && err != errLimit {
				t.Fatal(err)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("output %q, want %q", got, tt.want)
			}
		})
	}
}

func TestJoinLongLineInPieces(t *testing.T) {
	var buf bytes.Buffer
	o := newOutput(&buf, Options{TailLines: -1})
	j := joiner{out: o.line}
	frag := strings.Repeat("x", 16<<10)
	n := maxLine/len(frag) + 2 // past maxLine
	for i := range n {
		if err := j.add(record{ts: at(i), stream: streamStdout, partial: true, msg: []byte(frag)}); err != nil {
			t.Fatal(err)
		}
	}
	if buf.Len() != maxLine {
		t.Fatalf("%d bytes written before the line ended, want a %d-byte piece", buf.Len(), maxLine)
	}
	if err := j.add(record{ts: at(n), stream: streamStdout, newline: true, msg: []byte("end")}); err != nil {
		t.Fatal(err)
	}
	want := strings.Repeat(frag, n) + "end\n"
	if buf.String() != want {
		t.Errorf("output of %d bytes, want the %d bytes written, in order", buf.Len(), len(want))
	}
}
