package backoff

import (
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

func TestNextDoublesToMaxAndResets(t *testing.T) {
	c := testclock.NewFakePassiveClock(time.Unix(1000, 0))
	b := New(c, 10*time.Second, 40*time.Second, 10*time.Minute)
	var got []time.Duration
	for i := 0; i < 4; i++ {
		got = append(got, b.Next("k"))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 40 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("delay %d = %v, want %v (all %v)", i, got[i], want[i], got)
		}
	}
	c.SetTime(c.Now().Add(10*time.Minute + time.Second))
	if d := b.Next("k"); d != 10*time.Second {
		t.Fatalf("after reset delay = %v, want 10s", d)
	}
}

func TestRemaining(t *testing.T) {
	c := testclock.NewFakePassiveClock(time.Unix(1000, 0))
	b := New(c, 10*time.Second, 300*time.Second, 0)
	if r := b.Remaining("k", c.Now()); r != 0 {
		t.Fatalf("unknown key remaining = %v", r)
	}
	finished := c.Now()
	b.Next("k")
	c.SetTime(finished.Add(4 * time.Second))
	if r := b.Remaining("k", finished); r != 6*time.Second {
		t.Fatalf("remaining = %v, want 6s", r)
	}
	c.SetTime(finished.Add(11 * time.Second))
	if r := b.Remaining("k", finished); r != 0 {
		t.Fatalf("remaining after expiry = %v", r)
	}
}
