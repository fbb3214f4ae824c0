package logs

import (
	"context"
	"slices"
	"strings"
	"time"
)

// writerCloseWait is how long a follower waits for the runtime to close
// the file it rotated away from before reading the next one: containerd
// writes the last lines it had read into the old file while its new
// writer already writes to the new one. Past it, the follower moves on
// and still reads what comes late for drainGrace (out of order, not
// lost).
const writerCloseWait = time.Second

// drainGrace is how long a file the log moved on from is still read:
// the runtime's old writer may flush its last buffered bytes into it
// just after the new file got its first ones.
const drainGrace = 2 * time.Second

// follow reads the live file as it grows, and its successors as it is
// rotated, until the instance is over or ctx ends.
func (r *reader) follow(ctx context.Context) error {
	poll := r.opts.PollInterval
	if poll <= 0 {
		poll = time.Second
		if r.watch == nil {
			poll = 250 * time.Millisecond
		}
	}
	ticker := r.opts.Clock.NewTicker(poll)
	defer ticker.Stop()
	for {
		exited := false
		select {
		case <-r.opts.Exited:
			exited = true
		default:
		}
		over, err := r.step(exited)
		if err != nil {
			return err
		}
		if f, ok := r.out.w.(interface{ Flush() }); ok {
			f.Flush()
		}
		if over {
			return r.join.flush()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.opts.Exited:
		case <-r.watch:
		case <-ticker.C():
		}
	}
}

// step reads what the log has gained, moving on to the next file when
// the live one was rotated. exited says the instance is over; then step
// reads everything there is and reports over. A newer instance's log
// makes the instance over too (checked before reading, so nothing it
// wrote is missed).
//
//	cur (live) ──rotated: renamed──> cur named (first new rotated name)
//	   ▲                                │ next file = next rotated name, else the live one once it holds data
//	   └──────── open next ◄────────────┘ (cur kept as prev for drainGrace: late writes of the old writer)
func (r *reader) step(exited bool) (over bool, err error) {
	raced := 0
	for {
		l, err := r.list()
		if err != nil {
			return false, err
		}
		exited = exited || l.newer
		if r.prev != nil {
			if err := r.drain(r.prev); err != nil {
				return false, err
			}
			if exited || !r.opts.Clock.Now().Before(r.prevUntil) {
				if err := r.finish(r.prev); err != nil {
					return false, err
				}
				r.prev = nil
			}
		}
		if err := r.drain(r.cur); err != nil {
			return false, err
		}
		if r.cur.f != nil && l.live && l.liveIno == r.cur.ino {
			r.cur.name, r.cur.removed = "", false // still live (or renamed back)
			if !exited {
				return false, nil
			}
			return true, r.finish(r.cur)
		}
		if r.cur.name == "" && !r.cur.removed {
			name, ok := r.curName(l)
			switch {
			case ok:
				r.cur.name = name
			case !l.stable && raced < maxTries:
				raced++ // listed while it was being rotated: look again
				continue
			case !l.stable:
				return false, nil
			default:
				r.cur.removed = true
			}
		}
		next, ok := r.next(l)
		if !ok {
			// Renamed, not yet reopened.
			if !exited {
				return false, nil
			}
			return true, r.finish(r.cur)
		}
		if next == nil && l.liveLen == 0 && !exited {
			// The runtime reopened, but may still write its last bytes
			// to the old file: move on once the new one has data.
			return false, nil
		}
		if next == nil && !exited && !r.curClosed() {
			// ... and once the runtime closed the old one, or after a
			// while (then lines it writes late come out of order).
			now := r.opts.Clock.Now()
			if r.waitSince.IsZero() {
				r.waitSince = now
			}
			if now.Sub(r.waitSince) < r.closeWait {
				return false, nil
			}
		}
		var src *source
		var seen map[string]bool
		if next != nil {
			src, err = r.openRotated(*next)
		} else if src, seen, err = r.openLive(); err == nil && (seen == nil || r.rotatedAfter(seen)) {
			// The live file listed was rotated since: it is to be read
			// first, under its rotated name.
			src.close()
			if raced++; raced < maxTries {
				continue
			}
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if err := r.drain(r.cur); err != nil {
			src.close()
			return false, err
		}
		if r.cur.f != nil {
			if r.prev != nil {
				if err := r.finish(r.prev); err != nil {
					src.close()
					return false, err
				}
			}
			r.prev, r.prevUntil = r.cur, r.opts.Clock.Now().Add(drainGrace)
		}
		r.cur, r.waitSince = src, time.Time{}
		if seen != nil {
			r.seen = seen
		}
		if r.forget != nil {
			r.forget(func(name string) bool {
				return slices.ContainsFunc(l.rotated, func(e entry) bool { return e.name == name })
			})
		}
	}
}

// curClosed reports whether the runtime is done writing to cur, which
// was rotated: it closed the file (when that can be known).
func (r *reader) curClosed() bool {
	return r.writerClosed == nil || r.cur.f == nil || r.cur.removed || r.writerClosed(r.cur.name)
}

// curName is the rotated name of cur, which was the live file and is not
// any more: the rotated file with its inode while it is uncompressed,
// else the first name that was not there while it was live. Not found
// in a listing taken while it was being rotated, it is looked for again;
// not found in a stable one, it was removed rather than rotated.
func (r *reader) curName(l listing) (string, bool) {
	if name := r.nameOf(l, r.cur.ino); name != "" {
		return name, true
	}
	for _, e := range l.rotated {
		if !r.seen[e.name] {
			return e.name, true
		}
	}
	return "", false
}

// next is the file after cur: the next rotated one (non-nil), else the
// live one (nil, true), else none yet (false).
func (r *reader) next(l listing) (*entry, bool) {
	if r.cur.removed {
		return nil, l.live
	}
	cur := parseRotated(r.cur.name, strings.TrimPrefix(r.cur.name, r.base+"."))
	for i := range l.rotated {
		if compareRotated(l.rotated[i].rotated, cur) > 0 {
			return &l.rotated[i], true
		}
	}
	return nil, l.live
}
