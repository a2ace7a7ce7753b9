package sched

// Ordered releases results in discovery order whatever order they finish in
// (C8): Add returns the run of results that became printable.
type Ordered[T any] struct {
	next    int
	pending map[int]T
	skip    func(id int) bool
}

// NewOrdered starts at id 0.
func NewOrdered[T any]() *Ordered[T] { return &Ordered[T]{pending: map[int]T{}} }

// Add records result id and returns the results now releasable, in order.
func (o *Ordered[T]) Add(id int, v T) []T {
	o.pending[id] = v
	var out []T
	for {
		v, ok := o.pending[o.next]
		if !ok {
			return out
		}
		delete(o.pending, o.next)
		out = append(out, v)
		o.next++
	}
}

// Next is the id of the first result not yet released.
func (o *Ordered[T]) Next() int { return o.next }
