// Command failover walks through a KIP-1279 disaster recovery cycle between
// two in-process kmirror sites, A and B, and proves that no committed byte is
// lost or duplicated:
//
//  1. A owns a writable topic; B mirrors it ("a-to-b") while A takes writes,
//     across a leader-epoch change on A.
//
//  2. The link breaks: A keeps accepting writes that B never receives (one more
//     leader change on A included), then A crashes.
//
//  3. Failover: B stops "a-to-b". STOPPING persists the last mirrored epoch
//     (LME), bumps B's leader epoch and appends the MIRROR_PID_RESET barrier;
//     B's topic becomes writable and takes writes.
//
//  4. A comes back from its files. Failback: A creates "b-to-a" (source B)
//     and starts the topic. PREPARING looks the LME up on B and truncates A
//     after it; the first fetch then hits B's DivergingEpoch and truncates A to
//     where B's copy of that epoch ends. A catches up and ends byte-identical
//     to B; stopping "b-to-a" makes A writable again.
//
//     go run ./examples/failover
//
// Each site is a mirror.Mirror over a file-backed mirror.LocalDestination in a
// temporary directory. A site reads the other site's logs through a
// fetcher.LocalSource and uses the other *mirror.Mirror as its Peer (the LME
// lookup). The program prints the per-partition LME and the truncation
// offsets it observed, and exits 0 only when both sites end identical.
//
// main calls run(ctx, os.Stdout) with a 60 s deadline; main_test.go calls the
// same run, so CI proves the example works. Both Mirrors are closed before
// run returns.
package main
