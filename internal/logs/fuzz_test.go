package logs

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzParseCRILine feeds arbitrary bytes to parseCRI, as one raw line and
// split into lines as the reader splits a file, and the records it
// accepts to the joiner. It checks that parseCRI never panics; that an
// accepted record is well formed (a known stream, its message a part of
// the input, newline set exactly when the input ended with '\n') and,
// written out again in the CRI format, parses back to the same record;
// and that the joiner's lines are exactly those of a simple model: per
// stream, the fragments up to each F record joined, in the order the
// lines were finished, the unfinished ones flushed oldest first without
// a newline — no message byte lost, added or reordered.
func FuzzParseCRILine(f *testing.F) {
	for _, s := range []string{
		"2024-01-02T03:04:05.123456789Z stdout F hello world\n",
		"2024-01-02T03:04:05.123456789Z stderr P part\n",
		"2024-01-02T03:04:05.123456789Z stdout P:x:y frag\n",
		"2024-01-02T05:04:05.123456789+02:00 stdout F offset\n",
		"2024-01-02T03:04:05Z stdout F  spaces  kept \n",
		"2024-01-02T03:04:05Z stdout F last without newline",
		"2024-01-02T03:04:05Z stdout F\n",
		"2024-01-02T03:04:05Z stdin F x\n",
		"yesterday stdout F x\n",
		`{"log":"x\n","stream":"stdout","time":"2024-01-02T03:04:05Z"}` + "\n",
		cri(1, "stdout", "P", "out-") + cri(2, "stderr", "F", "err") + cri(3, "stdout", "F", "line"),
		cri(1, "stdout", "P", "o1") + cri(2, "stderr", "P", "e1") + cri(3, "stderr", "F", "e2") + cri(4, "stdout", "F", "o2"),
		cri(1, "stdout", "F", "a") + "garbage\n\n" + cri(2, "stdout", "P", "b") + cri(0, "stderr", "P", "older"),
		cri(1, "stdout", "F", "a") + cri(2, "stdout", "X", "unknown tag ends a line"),
		"\n\n\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// The whole input as one raw line.
		if rec, err := parseCRI(data); err == nil {
			checkRecord(t, data, rec)
		}

		// Split as drain does: each line with its '\n', a last one
		// without.
		var recs []record
		for rest := data; len(rest) > 0; {
			raw := rest
			if i := bytes.IndexByte(rest, '\n'); i >= 0 {
				raw = rest[:i+1]
			}
			rest = rest[len(raw):]
			rec, err := parseCRI(raw)
			if err != nil {
				continue
			}
			checkRecord(t, raw, rec)
			rec.msg = bytes.Clone(rec.msg)
			recs = append(recs, rec)
		}

		var got []line
		j := joiner{out: func(l line) error {
			l.msg = bytes.Clone(l.msg) // the joiner reuses its buffers
			got = append(got, l)
			return nil
		}}
		for _, rec := range recs {
			if err := j.add(rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := j.flush(); err != nil {
			t.Fatal(err)
		}
		want := modelJoin(recs)
		if len(got) != len(want) {
			t.Fatalf("joiner wrote %d lines, want %d:\n got %q\nwant %q", len(got), len(want), lineMsgs(got), lineMsgs(want))
		}
		for i := range want {
			if !got[i].ts.Equal(want[i].ts) || !bytes.Equal(got[i].msg, want[i].msg) || got[i].newline != want[i].newline {
				t.Fatalf("line %d: got {%v %q %v}, want {%v %q %v}", i,
					got[i].ts, got[i].msg, got[i].newline, want[i].ts, want[i].msg, want[i].newline)
			}
		}
	})
}

// checkRecord checks a record parseCRI accepted from raw, and that it
// survives being written out again.
func checkRecord(t *testing.T, raw []byte, rec record) {
	t.Helper()
	if rec.stream != streamStdout && rec.stream != streamStderr {
		t.Fatalf("%q: stream %q", raw, rec.stream)
	}
	if rec.newline != bytes.HasSuffix(raw, []byte{'\n'}) {
		t.Fatalf("%q: newline %v", raw, rec.newline)
	}
	body := bytes.TrimSuffix(raw, []byte{'\n'})
	if !bytes.HasSuffix(body, rec.msg) {
		t.Fatalf("%q: message %q is not the line's end", raw, rec.msg)
	}
	tag := "F"
	if rec.partial {
		tag = tagPartial
	}
	again := []byte(rec.ts.Format(time.RFC3339Nano) + " " + rec.stream + " " + tag + " ")
	again = append(again, rec.msg...)
	if rec.newline {
		again = append(again, '\n')
	}
	back, err := parseCRI(again)
	if err != nil {
		t.Fatalf("%q accepted, written out again as %q refused: %v", raw, again, err)
	}
	if !back.ts.Equal(rec.ts) || back.stream != rec.stream || back.partial != rec.partial ||
		back.newline != rec.newline || !bytes.Equal(back.msg, rec.msg) {
		t.Fatalf("%q: record %+v written out as %q reads back as %+v", raw, rec, again, back)
	}
}

// modelJoin is what the joiner must write for recs (none of whose lines
// reach maxLine): per stream, fragments are held until the stream's next
// F record; at the end, the unfinished lines, oldest first (stdout first
// on a tie).
func modelJoin(recs []record) []line {
	type open struct {
		ts  time.Time
		msg []byte
		on  bool
	}
	var out []line
	var st [2]open
	for _, r := range recs {
		p := &st[0]
		if r.stream == streamStderr {
			p = &st[1]
		}
		if !p.on {
			*p = open{ts: r.ts, on: true}
		}
		p.msg = append(p.msg, r.msg...)
		if !r.partial {
			out = append(out, line{ts: p.ts, msg: p.msg, newline: r.newline})
			*p = open{}
		}
	}
	first, second := st[0], st[1]
	if second.on && (!first.on || second.ts.Before(first.ts)) {
		first, second = second, first
	}
	for _, p := range []open{first, second} {
		if p.on {
			out = append(out, line{ts: p.ts, msg: p.msg})
		}
	}
	for i := range out {
		if out[i].msg == nil {
			out[i].msg = []byte{}
		}
	}
	return out
}

func lineMsgs(ls []line) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = string(l.msg)
	}
	return out
}

// lineWriter records each Write: output writes one line at a time.
type lineWriter struct {
	lines [][]byte
	n     int
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.lines = append(w.lines, bytes.Clone(b))
	w.n += len(b)
	return len(b), nil
}

func (w *lineWriter) bytes() []byte { return bytes.Join(w.lines, nil) }

// fuzzRotatedName is the rotated file of the fuzzed instance (1).
const fuzzRotatedName = "1.log.20240102-030405"

// FuzzReadLogs writes fuzzed bytes as a container's live log (1.log),
// optionally with a rotated file before it (plain, gzipped, or fuzzed
// bytes named .gz), beside a previous instance's log (0.log), and reads
// the latest instance with fuzzed TailLines, LimitBytes, SinceTime and
// Timestamps, through Read and ReadRestart. It checks:
//   - no panic, and no error but a corrupt gzip file's (which a read
//     the limit or the tail ends before the corrupt part need not meet);
//   - Read and ReadRestart of the same instance write the same bytes;
//   - with LimitBytes, at most that many bytes, exactly the start of what
//     the same read writes without a limit;
//   - without TailLines, the lines of the whole log (the reference read);
//   - with TailLines, exactly the reference read's last lines, at most
//     TailLines of them (the lines the end of the log completes or flushes
//     — a last line without '\n', each stream's unfinished line —
//     counted with the others; a line begun in the file before the first
//     one the tail needs is whole).
func FuzzReadLogs(f *testing.F) {
	full := cri(1, "stdout", "F", "one") + cri(2, "stderr", "P", "tw") + cri(3, "stderr", "F", "o") + cri(4, "stdout", "F", "three")
	f.Add([]byte(full), []byte(nil), uint8(0), int64(-1), int64(0), int64(-1), false)
	f.Add([]byte(full), []byte(nil), uint8(0), int64(2), int64(5), int64(2), true)
	f.Add([]byte(cri(16, "stdout", "F", "and ended")+cri(17, "stderr", "F", "line 7")+cri(18, "stdout", "P", "line 9 ")+
		cri(19, "stderr", "F", "line 8")+cri(20, "stdout", "F", "interleaved")+cri(21, "stdout", "F", "line 10")),
		[]byte(cri(13, "stdout", "F", "line 4")+cri(14, "stdout", "F", "line 5")+cri(15, "stdout", "P", "line 6 begun ")),
		uint8(1), int64(3), int64(0), int64(-1), false)
	f.Add([]byte(cri(5, "stdout", "F", "live")), []byte(cri(1, "stdout", "F", "a")+"garbage\n"+cri(2, "stderr", "P", "b")),
		uint8(2), int64(1), int64(7), int64(0), true)
	f.Add([]byte(cri(5, "stdout", "F", "live")), []byte("\x1f\x8b\x08\x00not gzip at all"), uint8(3), int64(-1), int64(0), int64(-1), false)
	f.Add([]byte(cri(1, "stdout", "F", "a")+cri(2, "stdout", "P", "unfinished")+cri(3, "stderr", "F", "no newline")[:40]),
		[]byte(nil), uint8(0), int64(0), int64(0), int64(-1), false)
	f.Add([]byte("2024-01-02T05:04:05.5+02:00 stdout F offset\n2024-01-02T03:04:05Z stderr P:x y\n"), []byte(nil),
		uint8(0), int64(1), int64(0), int64(-1), true)
	f.Fuzz(func(t *testing.T, live, rotated []byte, kind uint8, tail, limit, sinceMs int64, timestamps bool) {
		root := t.TempDir()
		dir := filepath.Join(root, "default_web_uid-1", "app")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		put := func(name string, b []byte) {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o640); err != nil {
				t.Fatal(err)
			}
		}
		put("0.log", []byte(cri(0, "stdout", "F", "previous instance")))
		put("1.log", live)
		switch kind % 4 {
		case 1: // a plain rotated file
			put(fuzzRotatedName, rotated)
		case 2: // a gzipped one
			var gz bytes.Buffer
			w := gzip.NewWriter(&gz)
			w.Write(rotated)
			w.Close()
			put(fuzzRotatedName+gzSuffix, gz.Bytes())
		case 3: // fuzzed bytes as a gzipped one
			put(fuzzRotatedName+gzSuffix, rotated)
		}
		if tail < -1 {
			tail = -1
		}
		if limit < 0 {
			limit = 0
		}
		var since time.Time
		if sinceMs >= 0 {
			since = at(int(sinceMs % 100))
		}
		d, err := OpenContainerDir(root, testRef)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		read := func(opts Options) (*lineWriter, error) {
			t.Helper()
			var w lineWriter
			err := Read(context.Background(), d, opts, &w)
			if err != nil && !expectedReadError(err) {
				t.Fatalf("Read %+v: %v", opts, err)
			}
			var again lineWriter
			err2 := ReadRestart(d, 1, opts, &again)
			if (err == nil) != (err2 == nil) || !bytes.Equal(w.bytes(), again.bytes()) {
				t.Fatalf("Read %+v: %q, %v; ReadRestart of the same instance: %q, %v", opts, w.bytes(), err, again.bytes(), err2)
			}
			if opts.LimitBytes > 0 && int64(w.n) > opts.LimitBytes {
				t.Fatalf("Read %+v wrote %d bytes, over LimitBytes", opts, w.n)
			}
			return &w, err
		}
		opts := Options{TailLines: tail, LimitBytes: limit, SinceTime: since, Timestamps: timestamps}
		got, err := read(opts)
		if err != nil {
			return // a corrupt gzip file: what was written before it is not checked
		}
		unlimited := opts
		unlimited.LimitBytes = 0
		all, err := read(unlimited)
		if err != nil {
			// Only if the limit ended the read before the corrupt part.
			if limit == 0 || int64(got.n) != limit || !bytes.HasPrefix(all.bytes(), got.bytes()) {
				t.Fatalf("read without LimitBytes failed (%v) where the read with it did not: %q, then %q", err, got.bytes(), all.bytes())
			}
			return
		}
		if !bytes.HasPrefix(all.bytes(), got.bytes()) || (limit > 0 && int64(got.n) != min(limit, int64(all.n))) || (limit == 0 && got.n != all.n) {
			t.Fatalf("LimitBytes %d wrote %q; without the limit %q", limit, got.bytes(), all.bytes())
		}
		if tail < 0 {
			return
		}
		refOpts := unlimited
		refOpts.TailLines = -1
		ref, err := read(refOpts)
		if err != nil {
			return // a corrupt file the tail did not need to read
		}
		if len(all.lines) > len(ref.lines) || int64(len(all.lines)) > tail {
			t.Fatalf("TailLines %d wrote %d lines (of %d): %q", tail, len(all.lines), len(ref.lines), all.lines)
		}
		off := len(ref.lines) - len(all.lines)
		for i, l := range all.lines {
			if r := ref.lines[off+i]; !bytes.Equal(l, r) {
				t.Fatalf("TailLines %d: line %d %q, want %q (all: %q, tail: %q)", tail, i, l, r, ref.lines, all.lines)
			}
		}
	})
}

// expectedReadError is an error a read of a corrupt gzipped file may
// end with.
func expectedReadError(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, gzip.ErrHeader) || errors.Is(err, gzip.ErrChecksum) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &corrupt)
}
