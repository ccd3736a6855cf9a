package consumergroup

import "sort"

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id         string
	instanceID string
	topics     []string // subscribed topics that exist, sorted
}

// assignInput is what an assignor computes a target assignment from: the
// members in member id order, the subscribed topics and the previous target.
type assignInput struct {
	members []assignMember
	topics  map[string]Topic
	prev    map[string]partSet
}

// assignUniform is the "uniform" assignor (Kafka's default for the consumer
// protocol): every partition of a subscribed topic goes to one of its
// subscribers, the counts as even as the subscriptions allow (no subscriber of
// a topic holds two more partitions than another subscriber of it that could
// take one), keeping each partition where the previous target had it when
// that stays balanced.
func assignUniform(in assignInput) map[string]partSet {
	out := make(map[string]partSet, len(in.members))
	subs := map[string][]int{} // topic → indexes of its subscribers
	for i, m := range in.members {
		out[m.id] = partSet{}
		for _, t := range m.topics {
			subs[t] = append(subs[t], i)
		}
	}
	names := make([]string, 0, len(subs))
	total := 0
	for name := range subs {
		names = append(names, name)
		total += int(in.topics[name].Partitions)
	}
	sort.Strings(names)
	counts := make([]int, len(in.members))
	eligible := func(i int, name string) bool {
		for _, j := range subs[name] {
			if j == i {
				return true
			}
		}
		return false
	}
	// The most a member keeps of its previous partitions: its fair share of
	// everything (rounded up), so a joining member finds partitions to take.
	quota := 0
	if len(in.members) > 0 {
		quota = (total + len(in.members) - 1) / len(in.members)
	}
	prevOwner := map[tp]int{}
	for i, m := range in.members {
		for k := range in.prev[m.id] {
			prevOwner[k] = i
		}
	}
	type part struct {
		name string
		k    tp
	}
	var free []part
	// Stickiness: previous owners keep their partitions, up to the quota.
	for _, name := range names {
		t := in.topics[name]
		for p := int32(0); p < t.Partitions; p++ {
			k := tp{t.ID, p}
			if i, ok := prevOwner[k]; ok && eligible(i, name) && counts[i] < quota {
				out[in.members[i].id][k] = struct{}{}
				counts[i]++
				continue
			}
			free = append(free, part{name, k})
		}
	}
	// The rest to the least loaded subscriber, the most constrained topics first.
	sort.SliceStable(free, func(a, b int) bool { return len(subs[free[a].name]) < len(subs[free[b].name]) })
	for _, f := range free {
		best := -1
		for _, i := range subs[f.name] {
			if best < 0 || counts[i] < counts[best] {
				best = i
			}
		}
		out[in.members[best].id][f.k] = struct{}{}
		counts[best]++
	}
	// Balance: move a partition to a subscriber holding two fewer, until none can.
	for moved := true; moved; {
		moved = false
		for _, name := range names {
			t := in.topics[name]
			for p := int32(0); p < t.Partitions; p++ {
				k := tp{t.ID, p}
				from := -1
				for _, i := range subs[name] {
					if _, ok := out[in.members[i].id][k]; ok {
						from = i
						break
					}
				}
				to := from
				for _, i := range subs[name] {
					if counts[i] < counts[to] {
						to = i
					}
				}
				if counts[from]-counts[to] > 1 {
					delete(out[in.members[from].id], k)
					out[in.members[to].id][k] = struct{}{}
					counts[from]--
					counts[to]++
					moved = true
				}
			}
		}
	}
	return out
}

// assignRange is the "range" assignor: per topic, its subscribers in member id
// order (instance id first for static members, so a restarted static member
// gets its ranges back) get consecutive ranges of partitions, the first
// (partitions mod subscribers) one more. Members subscribed to the same
// co-partitioned topics get the same partition numbers of each.
func assignRange(in assignInput) map[string]partSet {
	out := make(map[string]partSet, len(in.members))
	subs := map[string][]assignMember{}
	for _, m := range in.members {
		out[m.id] = partSet{}
		for _, t := range m.topics {
			subs[t] = append(subs[t], m)
		}
	}
	for name, ms := range subs {
		sort.SliceStable(ms, func(a, b int) bool { return rangeKey(ms[a]) < rangeKey(ms[b]) })
		t := in.topics[name]
		n := int32(len(ms))
		per, extra := t.Partitions/n, t.Partitions%n
		p := int32(0)
		for i, m := range ms {
			c := per
			if int32(i) < extra {
				c++
			}
			for j := int32(0); j < c; j++ {
				out[m.id][tp{t.ID, p}] = struct{}{}
				p++
			}
		}
	}
	return out
}

// rangeKey orders members for the range assignor: static members by instance
// id (before dynamic ones), dynamic ones by member id.
func rangeKey(m assignMember) string {
	if m.instanceID != "" {
		return "0" + m.instanceID
	}
	return "1" + m.id
}
