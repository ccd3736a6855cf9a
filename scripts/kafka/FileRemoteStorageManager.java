// FileRemoteStorageManager is the "remote" storage of kafka.sh's tiered-storage brokers
// (KMIRROR_KAFKA_TIERED_STORAGE=1): a RemoteStorageManager that keeps every uploaded segment,
// with its indexes, in a directory of the local file system, so that a test broker can tier
// segments off its log directory without any other service. kafka.sh install compiles it
// against the installed Kafka jars (only the public kafka-storage-api and kafka-clients types).
//
// Layout: <dir>/<topic id>-<partition>/<segment id>/ holds segment.log, offset.index,
// time.index, transaction.index (when the segment has one), producer.snapshot and
// leader-epoch.checkpoint. A segment is written to a temporary directory and renamed into
// place, so a reader never sees half of one.
package io.kmirror.kafkatest;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.Optional;

import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.server.log.remote.storage.LogSegmentData;
import org.apache.kafka.server.log.remote.storage.RemoteLogSegmentMetadata;
import org.apache.kafka.server.log.remote.storage.RemoteResourceNotFoundException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageException;
import org.apache.kafka.server.log.remote.storage.RemoteStorageManager;

public final class FileRemoteStorageManager implements RemoteStorageManager {
    /** The storage directory (rsm.config.dir in the broker's configuration). */
    public static final String DIR_CONFIG = "dir";

    private Path root;

    @Override
    public void configure(Map<String, ?> configs) {
        Object dir = configs.get(DIR_CONFIG);
        if (dir == null || dir.toString().isEmpty()) {
            throw new IllegalArgumentException("FileRemoteStorageManager needs " + DIR_CONFIG + " (rsm.config." + DIR_CONFIG + ")");
        }
        root = Paths.get(dir.toString());
        try {
            Files.createDirectories(root);
        } catch (IOException e) {
            throw new IllegalArgumentException("FileRemoteStorageManager: cannot create " + root + ": " + e, e);
        }
    }

    private Path segmentDir(RemoteLogSegmentMetadata md) {
        TopicIdPartition tp = md.topicIdPartition();
        return root.resolve(tp.topicId() + "-" + tp.partition()).resolve(md.remoteLogSegmentId().id().toString());
    }

    @Override
    public Optional<RemoteLogSegmentMetadata.CustomMetadata> copyLogSegmentData(RemoteLogSegmentMetadata md, LogSegmentData data)
            throws RemoteStorageException {
        Path dst = segmentDir(md);
        Path tmp = dst.resolveSibling(dst.getFileName() + ".tmp");
        try {
            deleteTree(tmp);
            Files.createDirectories(tmp);
            Files.copy(data.logSegment(), tmp.resolve("segment.log"));
            Files.copy(data.offsetIndex(), tmp.resolve("offset.index"));
            Files.copy(data.timeIndex(), tmp.resolve("time.index"));
            if (data.transactionIndex().isPresent()) {
                Files.copy(data.transactionIndex().get(), tmp.resolve("transaction.index"));
            }
            Files.copy(data.producerSnapshotIndex(), tmp.resolve("producer.snapshot"));
            ByteBuffer epochs = data.leaderEpochIndex().duplicate();
            try (FileChannel ch = FileChannel.open(tmp.resolve("leader-epoch.checkpoint"),
                    StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                while (epochs.hasRemaining()) {
                    ch.write(epochs);
                }
                ch.force(true);
            }
            Files.move(tmp, dst, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new RemoteStorageException("copy segment " + md.remoteLogSegmentId() + " to " + dst + ": " + e, e);
        }
        return Optional.empty();
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata md, int startPosition) throws RemoteStorageException {
        return fetchLogSegment(md, startPosition, Integer.MAX_VALUE - 1);
    }

    @Override
    public InputStream fetchLogSegment(RemoteLogSegmentMetadata md, int startPosition, int endPosition)
            throws RemoteStorageException {
        if (startPosition < 0 || endPosition < startPosition) {
            throw new IllegalArgumentException("bad segment range [" + startPosition + ", " + endPosition + "]");
        }
        Path file = segmentDir(md).resolve("segment.log");
        try {
            FileChannel ch = FileChannel.open(file, StandardOpenOption.READ);
            try {
                long size = ch.size();
                long end = Math.min(size, (long) endPosition + 1); // endPosition is inclusive
                ByteBuffer buf = ByteBuffer.allocate((int) Math.max(0, end - startPosition));
                long pos = startPosition;
                while (buf.hasRemaining()) {
                    int n = ch.read(buf, pos);
                    if (n < 0) {
                        break;
                    }
                    pos += n;
                }
                buf.flip();
                return new ByteArrayInputStream(buf.array(), 0, buf.limit());
            } finally {
                ch.close();
            }
        } catch (NoSuchFileException e) {
            throw new RemoteResourceNotFoundException("no remote segment " + md.remoteLogSegmentId() + " at " + file);
        } catch (IOException e) {
            throw new RemoteStorageException("read remote segment " + file + ": " + e, e);
        }
    }

    @Override
    public InputStream fetchIndex(RemoteLogSegmentMetadata md, IndexType type) throws RemoteStorageException {
        String name;
        switch (type) {
            case OFFSET: name = "offset.index"; break;
            case TIMESTAMP: name = "time.index"; break;
            case PRODUCER_SNAPSHOT: name = "producer.snapshot"; break;
            case TRANSACTION: name = "transaction.index"; break;
            case LEADER_EPOCH: name = "leader-epoch.checkpoint"; break;
            default: throw new IllegalArgumentException("unknown index type " + type);
        }
        Path file = segmentDir(md).resolve(name);
        try {
            return Channels.newInputStream(FileChannel.open(file, StandardOpenOption.READ));
        } catch (NoSuchFileException e) {
            throw new RemoteResourceNotFoundException("no " + type + " index for remote segment " + md.remoteLogSegmentId());
        } catch (IOException e) {
            throw new RemoteStorageException("read " + file + ": " + e, e);
        }
    }

    @Override
    public void deleteLogSegmentData(RemoteLogSegmentMetadata md) throws RemoteStorageException {
        try {
            deleteTree(segmentDir(md));
        } catch (IOException e) {
            throw new RemoteStorageException("delete remote segment " + md.remoteLogSegmentId() + ": " + e, e);
        }
    }

    private static void deleteTree(Path p) throws IOException {
        if (Files.isDirectory(p)) {
            try (DirectoryStream<Path> ds = Files.newDirectoryStream(p)) {
                for (Path c : ds) {
                    deleteTree(c);
                }
            }
        }
        Files.deleteIfExists(p);
    }

    @Override
    public void close() {
    }
}
