// Package mirror is kmirror's facade: it composes the coordinator, the fetchers, the
// state machine and the admin handlers into the KIP-1279 workflows (create, start, pause,
// resume, stop, fail back, delete, list, describe).
//
// The Controller holds desired state: mirror definitions (the CLUSTER_MIRROR configs of
// spec §13.2, validated by ParseMirrorConfig) and the desired state of every mirror topic,
// recorded in a ControllerLog as records.ControllerRecord values. It validates desired
// states only, with per-topic StateOffset fencing; actual partition states are checked by
// the caller through the coordinator (spec §9.7).
package mirror
