package overlay

// WithBeforeBegin returns o with a function Commit runs between staging
// the files and beginning its transaction (to race a gc there).
func WithBeforeBegin(o CommitOptions, f func()) CommitOptions {
	o.beforeBegin = f
	return o
}
