package fault

// Collector collects the faults of one object as a compile finds them.
type Collector struct {
	Kind, Name string
	Errs       List
}

// Add records a fault at a field path.
func (f *Collector) Add(field, what string) {
	f.Errs = append(f.Errs, &Fault{Kind: f.Kind, Name: f.Name, Field: field, Fault: what})
}
