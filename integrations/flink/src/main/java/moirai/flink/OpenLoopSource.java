package moirai.flink;

import java.util.concurrent.locks.LockSupport;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.metrics.Gauge;
import org.apache.flink.streaming.api.functions.source.RichParallelSourceFunction;

import moirai.jobs.Offered;
import moirai.jobs.Registry;
import moirai.jobs.Stamped;

/**
 * An open-loop source, as moirai's ({@code crates/engine/src/source.rs}): instance {@code j} of
 * {@code P} offers its share of the rate on its own clock. Tuple {@code n} is due at
 * {@code start + n / rate} (a ramp integrated); the source emits every due tuple, stamped with its
 * intended send time (the due time) and its ingress time (when it is emitted), and parks about
 * 50 µs when ahead of schedule. When the job cannot keep up the source falls behind, the intended
 * times stay on schedule, and end-to-end latency shows the delay; the tuples due but not emitted
 * are the backlog an external broker would hold, exposed as the FLIP-33 gauge
 * {@code pendingRecords} on the source's operator metric group. Without a rate limit it emits as
 * fast as the job takes tuples (intended = ingress). After {@code --duration} it returns, so the
 * job drains and finishes by itself.
 *
 * <p>The legacy {@code SourceFunction} API runs {@link #run} in the thread
 * {@code Legacy Source Thread - <vertex> (i/n)#0}; tuples are emitted under the checkpoint lock.
 *
 * @param <T> the tuples it emits
 */
abstract class OpenLoopSource<T extends Stamped> extends RichParallelSourceFunction<T> {
    private static final long serialVersionUID = 1L;

    /** The shortest park when ahead of schedule (moirai's {@code MIN_SLEEP_NS}). */
    private static final long MIN_PARK_NS = 50_000;
    /** Most tuples emitted under one hold of the checkpoint lock. */
    private static final int BATCH = 512;

    /** The schedule of the whole source (all instances); each instance takes its share. */
    private final Offered offered;
    private final long durationNs;

    private volatile boolean running = true;
    private transient Registry.SourceMeter meter;
    private transient Offered mine;

    OpenLoopSource(Offered offered, long durationNs) {
        this.offered = offered;
        this.durationNs = durationNs;
    }

    /** Prepares the data of instance {@code instance} of {@code parallelism}. */
    abstract void openGenerator(int instance, int parallelism);

    /** The {@code n}-th tuple of this instance (its timestamps are set by the caller). */
    abstract T next(long n);

    @Override
    public void open(OpenContext context) throws Exception {
        super.open(context);
        ClusterResults.open(getRuntimeContext());
        int parallelism = getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks();
        mine = offered.split(parallelism);
        meter = new Registry.SourceMeter(mine);
        Registry.SOURCES.add(meter);
        Registry.SUBTASKS.incrementAndGet();
        Registry.SourceMeter m = meter;
        getRuntimeContext().getMetricGroup().gauge("pendingRecords", (Gauge<Long>) m::pending);
        openGenerator(getRuntimeContext().getTaskInfo().getIndexOfThisSubtask(), parallelism);
    }

    @Override
    public void run(SourceContext<T> ctx) {
        long start = System.nanoTime();
        Registry.markStart(start);
        meter.start(start);
        long end = start + durationNs;
        long windowStart = Registry.windowStartNs();
        long windowEnd = Registry.windowEndNs();
        boolean unlimited = mine.isUnlimited();
        Object lock = ctx.getCheckpointLock();
        long n = 0;
        long measured = 0;
        while (running) {
            long now = System.nanoTime();
            if (now - end >= 0) {
                break;
            }
            long due = unlimited ? n + BATCH : Math.min(mine.due(now - start), n + BATCH);
            if (due <= n) {
                long next = start + mine.intendedNs(n);
                LockSupport.parkNanos(Math.min(Math.max(next - now, MIN_PARK_NS), end - now));
                continue;
            }
            synchronized (lock) {
                for (; n < due; n++) {
                    T t = next(n);
                    long ingress = System.nanoTime();
                    t.ingressNs = ingress;
                    t.intendedNs = unlimited ? ingress : start + mine.intendedNs(n);
                    if (ingress - windowStart >= 0 && ingress - windowEnd < 0) {
                        measured++;
                    }
                    ctx.collect(t);
                }
            }
            meter.progress(n, measured);
        }
        meter.progress(n, measured);
        meter.finish();
    }

    @Override
    public void close() throws Exception {
        if (meter != null) {
            ClusterResults.sourceClosed(getRuntimeContext(), meter);
        }
        super.close();
    }

    @Override
    public void cancel() {
        running = false;
    }
}
