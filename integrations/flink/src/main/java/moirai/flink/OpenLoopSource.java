package moirai.flink;

import java.io.IOException;
import java.util.List;

import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.core.io.SimpleVersionedSerializer;

import moirai.jobs.Offered;
import moirai.jobs.Stamped;

/**
 * An open-loop source, as moirai's ({@code crates/engine/src/source.rs}), as a FLIP-27
 * {@link Source}: reader {@code j} of {@code P} offers its share of the rate on its own clock
 * ({@link OpenLoopReader}). The same class on Flink 1.20 and 2.x, where the legacy
 * {@code SourceFunction} is gone.
 *
 * <p>There are no splits: every reader knows its index and the parallelism from its context and
 * generates its own share, so the enumerator assigns nothing (and there is nothing to checkpoint:
 * the jobs run without checkpoints). The source is {@link Boundedness#BOUNDED}: it ends after
 * {@code --duration}, and the job then drains and finishes by itself; {@link Run} runs it in
 * STREAMING mode all the same.
 *
 * @param <T> the tuples it emits
 */
abstract class OpenLoopSource<T extends Stamped> implements Source<T, OpenLoopSource.NoSplit, Void> {
    private static final long serialVersionUID = 1L;

    /** The schedule of the whole source (all readers); each reader takes its share. */
    private final Offered offered;
    private final long durationNs;

    OpenLoopSource(Offered offered, long durationNs) {
        this.offered = offered;
        this.durationNs = durationNs;
    }

    /** The generator of reader {@code instance} of {@code parallelism}. */
    abstract OpenLoopReader.Generator<T> generator(int instance, int parallelism);

    @Override
    public Boundedness getBoundedness() {
        return Boundedness.BOUNDED;
    }

    @Override
    public SourceReader<T, NoSplit> createReader(SourceReaderContext context) {
        int parallelism = context.currentParallelism();
        int instance = context.getIndexOfSubtask();
        return new OpenLoopReader<>(offered.split(parallelism), durationNs, generator(instance, parallelism),
                context.metricGroup());
    }

    @Override
    public SplitEnumerator<NoSplit, Void> createEnumerator(SplitEnumeratorContext<NoSplit> context) {
        return new Enumerator();
    }

    @Override
    public SplitEnumerator<NoSplit, Void> restoreEnumerator(SplitEnumeratorContext<NoSplit> context, Void checkpoint) {
        return new Enumerator();
    }

    @Override
    public SimpleVersionedSerializer<NoSplit> getSplitSerializer() {
        return new Nothing<>();
    }

    @Override
    public SimpleVersionedSerializer<Void> getEnumeratorCheckpointSerializer() {
        return new Nothing<>();
    }

    /** The split type; no split is ever made. */
    static final class NoSplit implements SourceSplit {
        @Override
        public String splitId() {
            return "none";
        }
    }

    /** Assigns nothing: the readers need no work from it. */
    static final class Enumerator implements SplitEnumerator<NoSplit, Void> {
        @Override
        public void start() {}

        @Override
        public void handleSplitRequest(int subtask, String host) {}

        @Override
        public void addSplitsBack(List<NoSplit> splits, int subtask) {}

        @Override
        public void addReader(int subtask) {}

        @Override
        public Void snapshotState(long checkpointId) {
            return null;
        }

        @Override
        public void close() {}
    }

    /** Serializes nothing (no split is made, the enumerator has no state). */
    static final class Nothing<X> implements SimpleVersionedSerializer<X> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(X x) {
            return new byte[0];
        }

        @Override
        public X deserialize(int version, byte[] bytes) throws IOException {
            if (bytes.length != 0) {
                throw new IOException("the open-loop source has no state to restore (" + bytes.length + " bytes)");
            }
            return null;
        }
    }
}
