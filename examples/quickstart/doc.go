// Command quickstart mirrors a topic from an embedded Kafka cluster into a
// file-backed destination with kmirror, proves the copy is byte for byte,
// then fails over (stops the mirror) and shows the topic writable.
//
//	go run ./examples/quickstart
//
// It needs no flags and no running Kafka: the source is an in-process kfake
// cluster fed by franz-go producers with every codec and with committed and
// aborted transactions; the destination is a mirror.LocalDestination in a
// temporary directory, removed at the end. It exits 0 when every step
// checks out and 1 otherwise.
//
// main calls run(ctx, os.Stdout) with a 60 s deadline; main_test.go calls the
// same run, so CI proves the example works. Everything it starts (the
// cluster, producers, the Mirror) is stopped before run returns.
package main
