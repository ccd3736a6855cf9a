package controller

import "regexp"

// TopicMatcher selects topic names by include and exclude patterns the way the
// topics.include and topics.exclude configs of a mirror do: each pattern is a regular
// expression matching the whole name (as Java's String.matches), a topic is selected
// when it matches an include pattern and no exclude pattern (exclude wins). Patterns
// are trimmed of spaces; empty ones are ignored. The zero TopicMatcher selects nothing.
type TopicMatcher struct {
	include, exclude []*regexp.Regexp
}

// NewTopicMatcher compiles include and exclude patterns (those of a lifecycle request:
// StartMirrorTopics, StopMirrorTopics). A pattern that is not a valid regular
// expression, or holds a comma, is refused with the INVALID_REQUEST error of
// ValidatePatterns.
func NewTopicMatcher(include, exclude []string) (TopicMatcher, error) {
	if err := ValidatePatterns(include, exclude); err != nil {
		return TopicMatcher{}, err
	}
	return TopicMatcher{
		include: compileList(splitList(joinList(include))),
		exclude: compileList(splitList(joinList(exclude))),
	}, nil
}

// Includes reports whether topic matches an include pattern and no exclude pattern.
func (m TopicMatcher) Includes(topic string) bool {
	return matchAny(m.include, topic) && !matchAny(m.exclude, topic)
}
