package review

// RuleBuffer backs the rule responses of every policy evaluated in one
// review: each policy's Rules is a window of it, capped at its own
// length, so one allocation serves the policies of a review and appending
// to one policy's Rules never reaches another's. The zero value is an
// empty buffer that grows as append grows a slice.
type RuleBuffer struct {
	rules []RuleResponse
	// beyond is how many more rule responses the policies may give than
	// rules has room for (Expect, Append).
	beyond int
}

// ruleBlock is the most rule responses room is made for at once.
const ruleBlock = 64

// Expect makes room for the n rule responses the review's policies may
// give, at most ruleBlock of them now (a large set's candidates may mostly
// not respond); room for the rest is made a block at a time when they
// come (Append). It returns how many it made room for.
func (b *RuleBuffer) Expect(n int) int {
	upFront := min(n, ruleBlock)
	b.rules = make([]RuleResponse, 0, upFront)
	b.beyond = n - upFront
	return upFront
}

// Len is where the next rule response goes: a policy's window starts
// there.
func (b *RuleBuffer) Len() int { return len(b.rules) }

// Append appends a rule response of the policy whose responses start at
// start and returns where they start now. When the buffer is full, the
// policy's responses so far move to a new block with room for those still
// expected (at most ruleBlock), instead of append copying every earlier
// policy's responses too: those stay where their policies' Rules point.
// At 1,000 policies a Pod got about 70 responses, and growing the slice
// past 64 cost 27 KiB a review, 40% of what the review allocated.
func (b *RuleBuffer) Append(start int, rr RuleResponse) int {
	if len(b.rules) == cap(b.rules) {
		moved := len(b.rules) - start
		// Beyond the expected count (or without one), the slice grows
		// as append grows it.
		size := max(2*moved, 1)
		if b.beyond > 0 {
			size = max(min(b.beyond, ruleBlock), moved+1)
		}
		b.beyond = max(b.beyond-(size-moved), 0)
		block := make([]RuleResponse, moved, size)
		copy(block, b.rules[start:])
		b.rules, start = block, 0
	}
	b.rules = append(b.rules, rr)
	return start
}

// Window is the policy's Rules: its responses from start on (start as
// Append last returned it), capped at their length; nil when it gave
// none.
func (b *RuleBuffer) Window(start int) []RuleResponse {
	if end := len(b.rules); end > start {
		return b.rules[start:end:end]
	}
	return nil
}

// One files rr as the whole response of a policy of one rule and returns
// that policy's Rules.
func (b *RuleBuffer) One(rr RuleResponse) []RuleResponse {
	start := len(b.rules)
	b.rules = append(b.rules, rr)
	return b.rules[start : start+1 : start+1]
}
