package pipelines

// WithoutPlaces is f without where its fields were written, for tests
// that compare Files.
func WithoutPlaces(f *File) *File {
	c := *f
	c.places = nil
	return &c
}
