package images

// SetTrace lets tests see steps a caller cannot: "wait" when a caller
// waits for a flight, "queue" when a flight waits for a slot. Set it
// before the first Pull.
func SetTrace(p *Puller, fn func(step, image string)) { p.trace = fn }
