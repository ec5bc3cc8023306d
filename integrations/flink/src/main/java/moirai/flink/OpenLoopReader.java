package moirai.flink;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.metrics.groups.SourceReaderMetricGroup;

import moirai.jobs.Offered;
import moirai.jobs.Registry;
import moirai.jobs.Stamped;

/**
 * One reader of an {@link OpenLoopSource}: it offers its share of the rate on its own clock, as
 * moirai's source ({@code crates/engine/src/source.rs}). Tuple {@code n} is due at
 * {@code start + n / rate} (a ramp integrated); each {@link #pollNext} emits the tuples due by
 * then (at most {@link #BATCH}), stamped with their intended send time (the due time) and their
 * ingress time (when emitted). When ahead of schedule it parks until the next tuple is due (at
 * least ~50 µs, at most {@link #MAX_PARK_NS} per call, so the task's mailbox is served at least
 * every millisecond), then emits what is due. When the job cannot keep up the reader falls
 * behind, the intended times stay on schedule, and end-to-end latency shows the delay; the tuples
 * due but not emitted are the backlog an external broker would hold, reported as FLIP-33's
 * {@code pendingRecords} gauge of the reader's metric group. Without a rate limit it emits as fast
 * as the job takes tuples (intended = ingress). After {@code --duration} it reports the end of its
 * input, so the job drains and finishes.
 *
 * <p>It runs in the source task's own thread ({@code "Source: <name> (i/P)#0"}) — generating,
 * emitting and waiting alike. It parks there rather than returning {@code NOTHING_AVAILABLE} with a
 * future completed by a timer thread: such a thread, measured at 2 × 2500 tuples/s, burnt 10 % of
 * a core waking the readers, work of the source's that the middleware, which schedules the task
 * thread, could neither see nor steer. The price: Flink counts the parked time as busy
 * ({@code busyTimeMsPerSecond} of a source task reads ~1000).
 *
 * @param <T> the tuples it emits
 */
final class OpenLoopReader<T extends Stamped> implements SourceReader<T, OpenLoopSource.NoSplit> {
    /** The shortest wait when ahead of schedule (moirai's {@code MIN_SLEEP_NS}). */
    private static final long MIN_PARK_NS = 50_000;
    /** Most tuples emitted by one {@link #pollNext}. */
    private static final int BATCH = 512;

    /** The longest park in one {@link #pollNext}. */
    private static final long MAX_PARK_NS = 1_000_000;

    /** Makes the tuples of one reader. */
    interface Generator<T> {
        /** The {@code n}-th tuple of this reader (its timestamps are set by the caller). */
        T next(long n);
    }

    private final Offered mine;
    private final long durationNs;
    private final Generator<T> generator;
    private final Registry.SourceMeter meter;
    private final boolean unlimited;
    private static final CompletableFuture<Void> AVAILABLE = CompletableFuture.completedFuture(null);
    private boolean started;
    private long start;
    private long end;
    private long windowStart;
    private long windowEnd;
    private long n;
    private long measured;
    private boolean finished;

    OpenLoopReader(Offered mine, long durationNs, Generator<T> generator, SourceReaderMetricGroup metrics) {
        this.mine = mine;
        this.durationNs = durationNs;
        this.generator = generator;
        this.unlimited = mine.isUnlimited();
        this.meter = new Registry.SourceMeter(mine);
        Registry.SOURCES.add(meter);
        Registry.SUBTASKS.incrementAndGet();
        metrics.setPendingRecordsGauge(meter::pending);
    }

    @Override
    public void start() {}

    private void begin() {
        start = System.nanoTime();
        Registry.markStart(start);
        meter.start(start);
        end = start + durationNs;
        windowStart = Registry.windowStartNs();
        windowEnd = Registry.windowEndNs();
    }

    @Override
    public InputStatus pollNext(ReaderOutput<T> output) {
        if (finished) {
            return InputStatus.END_OF_INPUT;
        }
        if (!started) {
            started = true;
            begin();
        }
        long now = System.nanoTime();
        if (now - end >= 0) {
            finish();
            return InputStatus.END_OF_INPUT;
        }
        long due = unlimited ? n + BATCH : Math.min(mine.due(now - start), n + BATCH);
        if (due <= n) {
            long next = start + mine.intendedNs(n);
            LockSupport.parkNanos(Math.min(Math.min(Math.max(next - now, MIN_PARK_NS), MAX_PARK_NS), end - now));
            now = System.nanoTime();
            due = Math.min(mine.due(now - start), n + BATCH);
            if (due <= n || now - end >= 0) {
                return InputStatus.MORE_AVAILABLE;
            }
        }
        for (; n < due; n++) {
            T t = generator.next(n);
            long ingress = System.nanoTime();
            t.ingressNs = ingress;
            t.intendedNs = unlimited ? ingress : start + mine.intendedNs(n);
            if (ingress - windowStart >= 0 && ingress - windowEnd < 0) {
                measured++;
            }
            output.collect(t);
        }
        meter.progress(n, measured);
        return InputStatus.MORE_AVAILABLE;
    }

    private void finish() {
        if (!finished) {
            finished = true;
            meter.progress(n, measured);
            meter.finish();
        }
    }

    @Override
    public CompletableFuture<Void> isAvailable() {
        return AVAILABLE;
    }

    @Override
    public List<OpenLoopSource.NoSplit> snapshotState(long checkpointId) {
        return List.of();
    }

    @Override
    public void addSplits(List<OpenLoopSource.NoSplit> splits) {}

    @Override
    public void notifyNoMoreSplits() {}

    @Override
    public void close() {
        finish();
    }
}
