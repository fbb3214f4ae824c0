package logs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"time"
)

// The CRI log format, one record per line:
//
//	<RFC3339Nano time> <stdout|stderr> <tag>[:<tag>...] <message>
//
// where the first tag is P for a fragment of a longer line (the runtime
// splits lines at its buffer size) and F for the last or only fragment.
const (
	streamStdout = "stdout"
	streamStderr = "stderr"
	tagPartial   = "P"
	// timeFormatOut is the kubelet's fixed-width RFC3339Nano, so that
	// prefixed lines align.
	timeFormatOut = "2006-01-02T15:04:05.000000000Z07:00"
	// maxLine bounds what a stream's unfinished line may hold: a writer
	// that never ends its line is written out in pieces of this size.
	maxLine = 1 << 20
)

// record is one parsed CRI log line. msg aliases the input.
type record struct {
	ts      time.Time
	stream  string
	partial bool
	newline bool // the raw line ended with '\n'
	msg     []byte
}

// parseCRI parses one raw CRI log line (with or without its '\n'), as the
// kubelet's parseCRILog: tags beyond the first are ignored, any first tag
// but P ends a line.
func parseCRI(raw []byte) (record, error) {
	var r record
	raw, r.newline = bytes.CutSuffix(raw, []byte{'\n'})
	ts, rest, ok := bytes.Cut(raw, []byte{' '})
	if !ok {
		return r, errors.New("no timestamp")
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return r, fmt.Errorf("timestamp %q: %w", ts, err)
	}
	r.ts = t
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, errors.New("no stream")
	}
	switch string(stream) {
	case streamStdout:
		r.stream = streamStdout
	case streamStderr:
		r.stream = streamStderr
	default:
		return r, fmt.Errorf("stream %q", stream)
	}
	tags, msg, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return r, errors.New("no tag")
	}
	first, _, _ := bytes.Cut(tags, []byte{':'})
	r.partial = string(first) == tagPartial
	r.msg = msg
	return r, nil
}

// line is one line of a container's output, its fragments joined.
type line struct {
	ts      time.Time // of its first fragment
	msg     []byte
	newline bool // false: the log ended inside the line, or a maxLine piece
}

// pending is a stream's unfinished line.
type pending struct {
	ts  time.Time
	buf []byte
	on  bool
}

// joiner joins the fragments of each stream's lines. A line is complete
// at its F record, so an stderr line written while stdout was mid-line
// comes out first: lines are in the order they were finished.
type joiner struct {
	out     func(line) error
	streams [2]pending // stdout, stderr
}

func (j *joiner) add(r record) error {
	p := &j.streams[0]
	if r.stream == streamStderr {
		p = &j.streams[1]
	}
	if !p.on && !r.partial {
		return j.out(line{ts: r.ts, msg: r.msg, newline: r.newline})
	}
	if !p.on {
		p.ts, p.buf, p.on = r.ts, p.buf[:0], true
	}
	p.buf = append(p.buf, r.msg...)
	if !r.partial {
		p.on = false
		return j.out(line{ts: p.ts, msg: p.buf, newline: r.newline})
	}
	if len(p.buf) >= maxLine {
		p.on = false
		return j.out(line{ts: p.ts, msg: p.buf})
	}
	return nil
}

// flush writes out the unfinished lines, oldest first, when the log ends.
func (j *joiner) flush() error {
	a, b := &j.streams[0], &j.streams[1]
	if b.on && (!a.on || b.ts.Before(a.ts)) {
		a, b = b, a
	}
	for _, p := range []*pending{a, b} {
		if p.on {
			p.on = false
			if err := j.out(line{ts: p.ts, msg: p.buf}); err != nil {
				return err
			}
		}
	}
	return nil
}

// errLimit ends a read at LimitBytes.
var errLimit = errors.New("byte limit reached")

// output applies SinceTime, TailLines, Timestamps and LimitBytes to the
// lines and writes them.
type output struct {
	w          io.Writer
	since      time.Time
	timestamps bool
	remain     int64 // < 0: unlimited
	// ring holds the last lines while the log is read up to its end for
	// TailLines; nil once they were written (or without TailLines).
	ring  []line
	next  int // ring slot of the next line
	full  bool
	tail  int64
	taken bool // catching up for TailLines
	buf   []byte
}

func newOutput(w io.Writer, opts Options) *output {
	o := &output{w: w, since: opts.SinceTime, timestamps: opts.Timestamps, remain: -1}
	if opts.LimitBytes > 0 {
		o.remain = opts.LimitBytes
	}
	if opts.TailLines >= 0 {
		o.tail, o.taken = opts.TailLines, true
		o.ring = make([]line, 0, min(opts.TailLines, 1024))
	}
	return o
}

func (o *output) line(l line) error {
	if !o.since.IsZero() && l.ts.Before(o.since) {
		return nil
	}
	if !o.taken {
		return o.write(l)
	}
	if o.tail == 0 {
		return nil
	}
	// The joiner reuses its buffers and records alias the reader's.
	l.msg = bytes.Clone(l.msg)
	if int64(len(o.ring)) < o.tail {
		o.ring = append(o.ring, l)
		return nil
	}
	o.ring[o.next] = l
	o.next = (o.next + 1) % len(o.ring)
	o.full = true
	return nil
}

// endTail writes the lines held for TailLines; later lines are written
// as they come.
func (o *output) endTail() error {
	if !o.taken {
		return nil
	}
	o.taken = false
	ring, next := o.ring, o.next
	o.ring = nil
	if !o.full {
		next = 0
	}
	for i := range ring {
		if err := o.write(ring[(next+i)%len(ring)]); err != nil {
			return err
		}
	}
	return nil
}

func (o *output) write(l line) error {
	b := o.buf[:0]
	if o.timestamps {
		b = l.ts.AppendFormat(b, timeFormatOut)
		b = append(b, ' ')
	}
	b = append(b, l.msg...)
	if l.newline {
		b = append(b, '\n')
	}
	o.buf = b
	limited := false
	if o.remain >= 0 && int64(len(b)) >= o.remain {
		b, limited = b[:o.remain], true
	}
	n, err := o.w.Write(b)
	if o.remain >= 0 {
		o.remain -= int64(n)
	}
	if err != nil {
		return err
	}
	if limited {
		return errLimit
	}
	return nil
}
