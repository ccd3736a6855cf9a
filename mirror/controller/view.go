package controller

// View is the read-only view of a Controller: mirror definitions, desired states, the
// applied offset and change notifications. It has none of the mutators, which check
// desired states only: a host changes desired state through the Mirror's workflows,
// which check the actual partition states first (spec §9.7). The zero View is not
// usable; get one from Controller.View. Safe for concurrent use.
type View struct{ c *Controller }

// View returns the read-only view of c.
func (c *Controller) View() View { return View{c: c} }

// Offset is Controller.Offset: the offset of the last applied controller record.
func (v View) Offset() int64 { return v.c.Offset() }

// Mirror is Controller.Mirror: the definition of mirror name.
func (v View) Mirror(name string) (MirrorInfo, bool) { return v.c.Mirror(name) }

// Mirrors is Controller.Mirrors: every mirror definition, sorted by name.
func (v View) Mirrors() []MirrorInfo { return v.c.Mirrors() }

// Topic is Controller.Topic: the desired state of topic.
func (v View) Topic(topic string) (TopicState, bool) { return v.c.Topic(topic) }

// Topics is Controller.Topics: the topics of mirror ("" = all), sorted by name.
func (v View) Topics(mirror string) []TopicState { return v.c.Topics(mirror) }

// Watch is Controller.Watch: fn runs, with the controller's lock held, after every
// durable change; it must not call the Controller or the View (see Controller.Watch).
func (v View) Watch(fn func(TopicState)) { v.c.Watch(fn) }
